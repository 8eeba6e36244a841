// Loading the directory index from Postgres and keeping it current (LISTEN directory_changed).
import { z } from 'zod';
import type { Db, Sql } from '#db/sql';
import { pricingRuleSchema, type PricingRule } from '#db/metered-apis';
import { CAPABILITY_SYNONYMS } from './vocabulary.js';
import { CAPABILITY_KIN_MIN_SIMILARITY, capabilityKin, capabilityVectors } from './capabilities.js';
import { DirectoryIndex } from './search-index.js';
import { parseTsvector, RANK_WEIGHTS, trigrams } from './scoring.js';
import { stem } from 'porter2';
import { isEnglishWord } from './wordnet.js';
import { cutAtWord, SUMMARY_DESCRIPTION_LENGTH } from './text.js';
import type { ApiSummaryRow, IndexedEndpoint, IndexedApi } from './index-types.js';
import { loadDenseVectors, QueryEmbeddings } from './semantic.js';
import { discoveryFeedback } from '#db/discovery-feedback';
import { FEEDBACK_WINDOW_DAYS, feedbackSignal } from './feedback.js';

/** A row of the index's load query: the summary columns (votes come apart) and the ranking data. */
interface ApiLoadRow extends Omit<ApiSummaryRow, 'votes_up' | 'votes_down'> {
  popularity: number;
  search_name: string;
  head: string;
  endpoint: string;
  endpoints: IndexedEndpoint[] | null;
  pricing_rules: unknown;
  /** The start of the description that API embeddings are computed from (semantic.ts). */
  embed_description: string;
  /** The description's first 2,000 characters, read for what it says of who may use the API (restrictedAccess). */
  access_text: string;
}

export async function loadVotes(db: Db): Promise<Map<string, { up: number; down: number }>> {
  const rows = await db<{ id: string; up: number; down: number }[]>`
    select target_id as id, count(*) filter (where value = 1)::int as up, count(*) filter (where value = -1)::int as down
      from votes where target_type = 'api' group by target_id`;
  return new Map(rows.map((r) => [r.id, { up: r.up, down: r.down }]));
}

/**
 * Reads the catalog's ranking data from Postgres (one snapshot) and builds the index; with
 * `embeddings`, also the APIs' stored vectors for dense retrieval (see semantic.ts).
 */
export async function loadDirectoryIndex(
  db: Db,
  extraWords: readonly string[] = [],
  embeddings?: { queries: QueryEmbeddings; warn: (message: string) => void },
): Promise<DirectoryIndex> {
  const read = async (tx: Db) => {
    const apis = await tx<ApiLoadRow[]>`
      select id, name, provider, service, categories, left(description, ${SUMMARY_DESCRIPTION_LENGTH + 1}::int) as description, left(description, 400) as embed_description, left(description, 2000) as access_text,
             price_micros, pricing_rules, featured, popularity,
             search_name, search_vector::text as head, endpoint_vector::text as endpoint,
             endpoints, pricing_rules
        from apis order by id`;
    // Catalog words with their english lexeme, plus the vocabulary's own terms (which may not be
    // catalog words) so that every expansion is stemmed exactly as Postgres does.
    const words = await tx<{ word: string; ndoc: number | null; lexeme: string | null }[]>`
      select w.word, d.ndoc, (select lexeme from unnest(to_tsvector('english', w.word)) limit 1) as lexeme
        from (select word from directory_words union select unnest(${[...extraWords]}::text[])) w(word)
        left join directory_words d on d.word = w.word`;
    const votes = await loadVotes(tx);
    return { apis, words, votes };
  };
  const { apis, words, votes } = 'begin' in db ? await (db as Sql).begin('isolation level repeatable read read only', read) : await read(db);
  const vectors = apis.map((row) => ({ head: parseTsvector(row.head), endpoint: [...parseTsvector(row.endpoint).keys()] }));
  // Names written as one word ("GlobalWineScore", "hackathonwatch.com") name their words too.
  const catalogWords = new Map(words.filter((w) => w.ndoc !== null).map((w) => [w.word, w.ndoc!]));
  const addedWords = new Map<string, number>();
  apis.forEach((row, i) => {
    const head = vectors[i]!.head;
    const pieces = new Set<string>();
    for (const token of row.search_name.split(/[^a-z0-9]+/)) for (const piece of splitCompound(token, catalogWords)) pieces.add(piece);
    for (const piece of pieces) {
      const lexeme = stem(piece);
      if (!head.has(lexeme)) head.set(lexeme, [RANK_WEIGHTS[3]!]);
      if (!catalogWords.has(piece)) addedWords.set(piece, (addedWords.get(piece) ?? 0) + 1);
    }
  });
  for (const [word, ndoc] of addedWords) words.push({ word, ndoc, lexeme: stem(word) });
  const indexed: IndexedApi[] = apis.map((row, i) => ({
    id: row.id,
    name: row.name,
    provider: row.provider,
    service: row.service,
    categories: row.categories,
    description: cutAtWord(row.description, SUMMARY_DESCRIPTION_LENGTH),
    price_micros: row.price_micros,
    pricing_rules: row.pricing_rules,
    featured: row.featured,
    popularity: row.popularity,
    restricted: restrictedAccess(row.access_text),
    votes_up: votes.get(row.id)?.up ?? 0,
    votes_down: votes.get(row.id)?.down ?? 0,
    endpoints: Array.isArray(row.endpoints) ? row.endpoints : [],
    pricingRules: pricingRulesOf(row.pricing_rules),
    nameTrigrams: trigrams(row.search_name),
    endpointLexemes: vectors[i]!.endpoint.length,
  }));
  const known = words.filter((w) => w.ndoc !== null).map((w) => ({ word: w.word, ndoc: w.ndoc!, lexeme: w.lexeme }));
  const extraLexemes = new Map(words.filter((w) => w.ndoc === null).map((w) => [w.word, w.lexeme] as const));
  const embedder = embeddings ? await embeddings.queries.model() : null;
  const dense = embedder
    ? await loadDenseVectors(
        db,
        apis.map((row, i) => ({
          id: row.id,
          name: row.name,
          description: row.embed_description,
          categories: row.categories,
          endpoints: indexed[i]!.endpoints,
        })),
        embedder,
        embeddings!.warn,
      )
    : null;
  // The capability layer's descriptions, embedded once per process and model (capabilities.ts).
  const capabilities = embedder && dense ? await capabilityVectors(embedder) : null;
  // Which APIs are of each kind in meaning: one product of each description with the catalog per load.
  const kin = capabilities && dense ? await capabilityKin(capabilities, (v) => dense.similarities(v), CAPABILITY_KIN_MIN_SIMILARITY) : null;
  return new DirectoryIndex(indexed, vectors, known, { extraLexemes, dense, capabilities, kin });
}

/** An API's price rules; none when the column holds something else (the proxy reads it the same way). */
function pricingRulesOf(value: unknown): PricingRule[] {
  if (!Array.isArray(value) || value.length === 0) return [];
  const rules = z.array(pricingRuleSchema).safeParse(value);
  return rules.success ? rules.data : [];
}

/** The channel the statement triggers of migration 00007 notify: payload 'apis', 'votes' or 'words'. */
export const DIRECTORY_CHANNEL = 'directory_changed';
/**
 * A reload (about half a second, mostly building the index on the event loop) starts once changes
 * have been quiet this long, and at the latest RELOAD_MAX_WAIT_MS after the first: an import commits
 * a batch every few hundred milliseconds, and reloading after each would keep the edge busy.
 */
const RELOAD_QUIET_MS = 500;
const RELOAD_MAX_WAIT_MS = 3_000;

/** The vocabulary's expansion terms, stemmed by Postgres at load like catalog words. */
const VOCABULARY_TERMS = [...new Set(CAPABILITY_SYNONYMS.flatMap(([, expansion]) => expansion.split(' ')))];

/** Where the live index reports reload failures (a pino/Fastify logger fits). */
export interface IndexLog {
  warn(object: Record<string, unknown>, message: string): void;
}

/**
 * The directory index of one process, owned and closed by whoever creates it (the edge app, a
 * benchmark, the evaluation script): loaded on first use and kept current by LISTEN. A change to
 * the catalog reloads it (debounced; answers come from the previous index meanwhile), a vote
 * reloads only the tallies. A failed reload is logged and the previous index keeps answering.
 */
export class LiveDirectoryIndex {
  private ready: DirectoryIndex | null = null;
  private pending: Promise<DirectoryIndex> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private firstChangeAt = 0;
  private loading = false;
  private again = false;

  private unlisten: (() => Promise<void>) | null = null;
  private closed = false;
  /** Task vectors for dense retrieval; null when DISCOVERY_MODEL_DIR is 'off'. */
  readonly embeddings: QueryEmbeddings | null;
  /** The feedback signals last read (feedback.ts), applied to every index loaded after; null until read. */
  private feedback: ReadonlyMap<string, { signal: number; accounts: number }> | null = null;
  private feedbackTimer: NodeJS.Timeout | null = null;
  private feedbackReading: Promise<void> | null = null;
  private readonly feedbackRefreshMs: number;

  /**
   * `modelDir`: the embedding model's directory (semantic.ts, modelDirSetting), null for word ranking
   * only; `rememberTasks`: how many task vectors are kept (DISCOVERY_TASK_VECTORS);
   * `feedbackRefreshMs`: how often discovery's feedback signal is read from the accounts' use
   * (DISCOVERY_FEEDBACK_REFRESH_SECONDS; feedback.ts), 0 or absent for none (every API's signal 0).
   */
  constructor(
    private readonly db: Db,
    private readonly log?: IndexLog,
    options: { modelDir?: string | null; rememberTasks?: number; feedbackRefreshMs?: number } = {},
  ) {
    this.feedbackRefreshMs = options.feedbackRefreshMs ?? 0;
    this.embeddings = options.modelDir
      ? new QueryEmbeddings(options.modelDir, (message, error) => this.log?.warn({ err: error }, message), options.rememberTasks)
      : null;
  }

  private load(): Promise<DirectoryIndex> {
    const embeddings = this.embeddings;
    return loadDirectoryIndex(
      this.db,
      VOCABULARY_TERMS,
      embeddings ? { queries: embeddings, warn: (message) => this.log?.warn({}, message) } : undefined,
    );
  }

  get(): DirectoryIndex | Promise<DirectoryIndex> {
    if (this.ready) return this.ready;
    this.pending ??= this.start().catch((error: unknown) => {
      this.pending = null;
      throw error;
    });
    return this.pending;
  }

  private async start(): Promise<DirectoryIndex> {
    // Listen before loading, so no change between the snapshot and the subscription is missed.
    if ('listen' in this.db) {
      try {
        const subscription = await (this.db as Sql).listen(
          DIRECTORY_CHANNEL,
          (payload) => this.changed(payload),
          // Called again after a reconnect: notifications may have been missed meanwhile.
          () => {
            if (this.ready) this.schedule();
          },
        );
        this.unlisten = () => subscription.unlisten();
      } catch (error) {
        // Without notifications the index stays as loaded (a database without LISTEN support).
        this.log?.warn({ err: error }, 'directory index: LISTEN failed; the index will not follow catalog changes');
      }
    }
    this.ready = await this.load();
    if (this.feedbackRefreshMs > 0 && !this.closed) {
      // Not waited for: the first answers do not wait for the signal's read (a second or two on a large
      // database); they rank without it until it lands. The next reads come every feedbackRefreshMs, each
      // index (a ranking thread has its own) at its own moment within the first interval.
      void this.refreshFeedback();
      const every = this.feedbackRefreshMs;
      this.feedbackTimer = setTimeout(
        () => {
          void this.refreshFeedback();
          this.feedbackTimer = setInterval(() => void this.refreshFeedback(), every);
          this.feedbackTimer.unref();
        },
        Math.round(every * (0.5 + Math.random())),
      );
      this.feedbackTimer.unref();
    }
    // The first load's promise is not kept once it has answered: it would hold the first index
    // for the process's life after a reload replaced it (two indexes per thread, seen in a soak's
    // heap snapshots).
    this.pending = null;
    return this.ready;
  }

  private changed(payload: string): void {
    if (payload === 'votes' && this.ready) {
      const index = this.ready;
      loadVotes(this.db)
        .then((tallies) => index.setVotes(tallies))
        .catch((error: unknown) => this.log?.warn({ err: error }, 'directory index: reloading vote tallies failed'));
      return;
    }
    this.schedule();
  }

  /**
   * Reads discovery's feedback signal (per API, the accounts that used it; feedback.ts) and applies it
   * to the index; a failed read keeps the signals as they were. Called every `feedbackRefreshMs`.
   */
  async refreshFeedback(): Promise<void> {
    // One read at a time: a slow one is not stacked upon.
    if (this.feedbackReading) return this.feedbackReading;
    this.feedbackReading = this.readFeedback().finally(() => {
      this.feedbackReading = null;
    });
    return this.feedbackReading;
  }

  private async readFeedback(): Promise<void> {
    try {
      const used = await discoveryFeedback(this.db, FEEDBACK_WINDOW_DAYS);
      const signals = new Map<string, { signal: number; accounts: number }>();
      for (const [id, { used: accounts, followed }] of used) signals.set(id, { signal: feedbackSignal(accounts, followed), accounts });
      this.feedback = signals;
      this.ready?.setFeedback(signals);
    } catch (error) {
      if (!this.closed) this.log?.warn({ err: error }, 'directory index: reading discovery feedback failed; the previous signals stay');
    }
  }

  /** Stops following changes (the owner calls it when it shuts down). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.feedbackTimer) clearTimeout(this.feedbackTimer);
    this.feedbackTimer = null;
    await this.unlisten?.().catch(() => {});
    this.unlisten = null;
    await this.embeddings?.close().catch(() => {});
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.loading) {
      this.again = true;
      return;
    }
    const now = Date.now();
    if (this.timer) {
      if (now - this.firstChangeAt >= RELOAD_MAX_WAIT_MS) return;
      clearTimeout(this.timer);
    } else {
      this.firstChangeAt = now;
    }
    const delay = Math.min(RELOAD_QUIET_MS, Math.max(0, this.firstChangeAt + RELOAD_MAX_WAIT_MS - now));
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.reload();
    }, delay);
    this.timer.unref();
  }

  private async reload(): Promise<void> {
    this.loading = true;
    this.again = false;
    try {
      const index = await this.load();
      if (this.feedback) index.setFeedback(this.feedback);
      this.ready = index;
    } catch (error) {
      // Keep answering from the previous index; the next change retries.
      this.log?.warn({ err: error }, 'directory index: reload failed; answering from the previous index');
    } finally {
      this.loading = false;
      if (this.again) this.schedule();
    }
  }
}

/**
 * The words of a name written as one ("globalwinescore" -> global, wine, score): the split into the
 * fewest words of at least three letters, each a catalog word or an English word (WordNet), and
 * only for a token of at least seven letters that is neither itself. [] when there is no such split.
 */
export function splitCompound(token: string, catalogWords: ReadonlyMap<string, number>): string[] {
  if (token.length < 7 || !/^[a-z]+$/.test(token) || isEnglishWord(token)) return [];
  const known = (w: string) => w.length >= 3 && ((catalogWords.get(w) ?? 0) >= 2 || isEnglishWord(w));
  // best[i]: the fewest pieces covering token[0, i), and where the last piece starts.
  const best: { pieces: number; from: number }[] = [{ pieces: 0, from: -1 }];
  for (let end = 1; end <= token.length; end++) {
    best[end] = { pieces: Number.POSITIVE_INFINITY, from: -1 };
    for (let start = Math.max(0, end - 20); start <= end - 3; start++) {
      if (best[start]!.pieces === Number.POSITIVE_INFINITY || !known(token.slice(start, end))) continue;
      if (best[start]!.pieces + 1 < best[end]!.pieces) best[end] = { pieces: best[start]!.pieces + 1, from: start };
    }
  }
  if (best[token.length]!.pieces < 2 || best[token.length]!.pieces === Number.POSITIVE_INFINITY) return [];
  const out: string[] = [];
  for (let end = token.length; end > 0; end = best[end]!.from) out.unshift(token.slice(best[end]!.from, end));
  return out;
}

/**
 * Whether an API's description says that it is not open to every developer, or that the whole API is withdrawn:
 * eBay's "(Limited Release) API available only to select developers approved by business units", Xero's "a closed
 * API that is only available to financial institutions", VTEX's "in closed beta, available only for selected
 * customers", "NOTE: This API is deprecated." An agent cannot use such an API, so discovery ranks it below the open
 * ones of its kind (RESTRICTED_FACTOR in catalog.ts). A deprecated field, version or URL does not count.
 */
export function restrictedAccess(description: string): boolean {
  return RESTRICTED.some((pattern) => pattern.test(description));
}

const RESTRICTED = [
  /\(limited release\)/i,
  /\bis a closed api\b/i,
  /\binvitation-only api\b/i,
  // The whole API or product in a closed beta (VTEX's "This feature is in closed beta"), not one feature of it
  // ("Instant payouts are in private beta").
  /\b(?:this|the) (?:api|feature|service|product) is in (?:a )?(?:closed|private) beta\b/i,
  /\b(?:api|service) is (?:available )?(?:only|by invitation)(?: available)? (?:to|for) (?:select|selected|approved)\b/i,
  // The API itself withdrawn ("NOTE: This API is deprecated.", "The AWS IoT Things Graph service is discontinued."),
  // not an older version of it ("Version 1 of the API has been deprecated").
  /(?<!of )\b(?:this|the) api (?:is|has been) (?:deprecated|retired|discontinued)\b/i,
  /\b(?:api|service) (?:is|has been) (?:discontinued|retired|shut down)\b/i,
  /\bhas been (?:retired|discontinued) and is no longer (?:supported|available)\b/i,
  /\bapis? (?:is|are) no longer supported\b/i,
  /^the deprecated\b/i,
  /\(deprecated\)\s*$/i,
];
