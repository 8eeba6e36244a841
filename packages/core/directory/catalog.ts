/**
 * The directory's read side: browse, relevance search, categories and natural-language discovery.
 *
 * Ranking (search and discovery share it): a weighted full-text rank over name/provider/service (A),
 * categories (B) and description (C); a separate, length-normalized rank over endpoint summaries
 * and path words; the share of the query's concepts the API covers; trigram similarity of the query
 * to the API's name (typos in names); and, as small tie-breakers, curated popularity, the featured
 * flag and votes. Terms that are not words of the catalog are corrected to the closest catalog
 * word by trigram similarity (kept alongside the original). Discovery also drops filler words and
 * adds capability terms from the task vocabulary ("text message" -> sms).
 */
import { PlatformError } from '#core/platform';
// The pure pricing rules only: the gateway's index would load the proxy into every ranking worker.
import { operationPriceMicros } from '../gateway/pricing.js';
import { DISCOVERY_STOPWORDS, expandCapabilities, taskNeeds } from './vocabulary.js';
import { CAPABILITIES } from './capabilities.js';
import { isEnglishWord, relatedWords, type Relation } from './wordnet.js';
import { ENGLISH_STOPWORDS } from './scoring.js';
import type { LiveDirectoryIndex } from './index-loader.js';
import type { ApiSummaryRow, IndexedApi } from './index-types.js';
import { UNCATEGORIZED, type DirectoryIndex } from './search-index.js';
import { nearestOf } from './semantic.js';
import { cutAtWord, SUMMARY_DESCRIPTION_LENGTH, type AuthScheme } from './text.js';
import type { ApiOAuth } from '#contracts/auth-scheme';
import type { Db, SqlFragment } from '#db/sql';

export { UNCATEGORIZED };
export const MAX_QUERY_LENGTH = 500;
const MAX_TERMS = 24;

export type { ApiSummaryRow };

export interface ApiDetailRow extends ApiSummaryRow {
  version: string | null;
  base_url: string;
  auth_scheme: AuthScheme;
  oauth: ApiOAuth | null;
  oauth_provider: string | null;
  key_docs_url: string | null;
  endpoints: { method: string; path: string; summary: string; scopes?: string[] }[];
  endpoint_count: number;
  byok_price_micros: bigint | null;
  has_platform_key: boolean;
  source: string;
  instructions: string | null;
}

/**
 * The base URL an API's details and instructions may show: a catalog API's, which came from a public
 * catalog, and never an operator-registered one's, which may be a private or internal host (see
 * docs/decisions/published-base-urls.md).
 */
export function publishedBaseUrl(row: Pick<ApiDetailRow, 'base_url' | 'source'>): string | null {
  return row.source === 'apis.guru' ? row.base_url : null;
}

/** Opaque paging cursor: base64url of {"o": offset}. The catalog changes rarely; offsets are stable enough. */
export function encodeCursor(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): number {
  if (!cursor) return 0;
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { o?: unknown };
    if (typeof value.o === 'number' && Number.isInteger(value.o) && value.o >= 0 && value.o <= 1_000_000) return value.o;
  } catch {
    // fall through
  }
  throw new PlatformError('validation_failed', 'cursor is not valid', { hint: 'Pass the nextCursor of a previous page unchanged, or omit it.' });
}

const SUMMARY_COLUMNS = (db: Db) => db`
  a.id, a.name, a.provider, a.service, a.categories, left(a.description, ${SUMMARY_DESCRIPTION_LENGTH + 1}::int) as description, a.price_micros, a.pricing_rules, a.featured,
  coalesce(v.up, 0)::int as votes_up, coalesce(v.down, 0)::int as votes_down`;

const VOTES_JOIN = (db: Db) => db`
  left join lateral (
    select count(*) filter (where value = 1) as up, count(*) filter (where value = -1) as down
      from votes where target_type = 'api' and target_id = a.id
  ) v on true`;

/** Lower-case, accents removed, words only. */
export function normalizeQuery(q: string): string {
  return (
    q
      // Apostrophes come typed (') or typeset (’, ‘, ʼ, ´; the last would decompose below).
      .replace(/[\u2018\u2019\u02bc\u00b4]/g, "'")
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      // A possessive or contraction's tail ("tonight's", "the 90's", "I'd", "we'll") is no word of its own:
      // split off, "s" or "d" would match every API that has the letter as a token; "n't" is "not" ("can't"
      // and "won't" first).
      .replace(/\bcan't(?![a-z])/g, 'can not')
      .replace(/\bwon't(?![a-z])/g, 'will not')
      .replace(/([a-z])n't(?![a-z])/g, '$1 not')
      .replace(/([a-z0-9])'(s|d|m|t|ll|re|ve)(?![a-z])/g, '$1')
      // Spoken contractions, as a voice assistant transcribes them ("is it gonna freeze tonight").
      .replace(/\bgonna\b/g, 'going to')
      .replace(/\bwanna\b/g, 'want to')
      .replace(/\bgotta\b/g, 'got to')
      .replace(/[^a-z0-9]+/g, ' ')
      .trim()
  );
}

export interface QueryPlan {
  /** The words searched (after dropping filler words in discovery). */
  words: string[];
  /** Spelling corrections applied: word -> catalog word. */
  corrections: Record<string, string>;
  /** Capability terms added from the vocabulary and related words from WordNet (discovery). */
  expansions: string[];
  /** Concept groups, each a to_tsquery OR-expression; coverage counts the groups an API matches. */
  groups: string[];
  /** Every term of every group (parallel arrays): its group index, text and IDF weight. */
  termGroups: number[];
  terms: string[];
  weights: number[];
  /** Per term of `terms`: its weight factor (1, or less for a related word). */
  factors: number[];
  /** Per term of `any`, in order: its weight factor in the text rank (1, or less for a related word). */
  termFactors: number[];
  /** All terms, one to_tsquery OR-expression. */
  any: string;
  /** The terms that pick candidates (see planQuery). */
  selective: string;
  /** The normalized text compared to names by trigram similarity. */
  raw: string;
}

/** Validates a free-text query: not empty, not only punctuation, not longer than MAX_QUERY_LENGTH. */
export function checkQueryText(q: string, param = 'q'): string {
  if (q.length > MAX_QUERY_LENGTH) {
    throw new PlatformError('validation_failed', `${param} is too long (${q.length} characters; at most ${MAX_QUERY_LENGTH})`, {
      hint: 'Describe the task in a sentence or two; long texts do not search better.',
    });
  }
  const normalized = normalizeQuery(q);
  if (!normalized) {
    throw new PlatformError('validation_failed', q.trim() ? `${param} has no words to search for` : `${param} is required`, {
      hint: `Pass ${param} with a few words, e.g. ?${param}=send+a+text+message.`,
    });
  }
  return normalized;
}

const expansionMemo = new Map<string, string[]>();
/** expandCapabilities of one word, remembered (the vocabulary is fixed; the memo is bounded). */
function wordExpansions(word: string): string[] {
  let terms = expansionMemo.get(word);
  if (!terms) {
    if (expansionMemo.size >= 10_000) expansionMemo.clear();
    expansionMemo.set(word, (terms = expandCapabilities(word)));
  }
  return terms;
}

/**
 * How much a related word counts against the query's own word, by its WordNet relation (0: not
 * used). Broader words and wholes cost more than they gave on the development sets.
 */
export const RELATED_WEIGHT: Record<Relation, number> = { synonym: 0.6, similar: 0.5, derived: 0.5, broader: 0, whole: 0 };
/** At most this many related words per query word (the closest relations first). */
const RELATED_PER_WORD = 8;
/** Words used by more APIs than this are not expanded. */
const RELATED_MAX_DOCS = 5;

/** Catalog words related to a query word in WordNet, with their weight factor (discovery). */
function relatedTerms(index: DirectoryIndex, word: string): { term: string; factor: number }[] {
  if (word.length < 3 || !/^[a-z]+$/.test(word)) return [];
  // Only words the catalog barely uses: there the everyday word and the trade word differ, while
  // expanding a word the catalog knows well mostly adds noise (measured in docs/DISCOVERY.md).
  if ((index.documentFrequency(word) ?? 0) > RELATED_MAX_DOCS) return [];
  const out: { term: string; factor: number }[] = [];
  for (const { word: related, relation } of relatedWords(word)) {
    if (RELATED_WEIGHT[relation] === 0) continue;
    if (DISCOVERY_STOPWORDS.has(related) || ENGLISH_STOPWORDS.has(related) || index.documentFrequency(related) === undefined) continue;
    if (out.length >= RELATED_PER_WORD) break;
    out.push({ term: related, factor: RELATED_WEIGHT[relation] });
  }
  return out;
}

/** Turns normalized query text into the plan ranking runs: words, corrections, expansions, concept groups, IDF weights. */
export function planQuery(index: DirectoryIndex, normalized: string, discovery: boolean): QueryPlan {
  let words = [...new Set(normalized.split(' ').filter(Boolean))];
  if (discovery) {
    const content = words.filter((w) => !DISCOVERY_STOPWORDS.has(w));
    if (content.length) words = content;
  }
  words = words.slice(0, MAX_TERMS);
  const expansions = discovery ? expandCapabilities(normalized).filter((t) => !words.includes(t)) : [];
  // Spelling: a word the catalog never uses gets the closest catalog word, kept beside the original.
  // The same look-up gives each word's document frequency, for IDF weights of the concept groups.
  const corrections: Record<string, string> = {};
  const docFreq = new Map<string, number>();
  const totalApis = Math.max(1, index.size);
  const related = new Map(discovery ? words.map((w) => [w, relatedTerms(index, w)] as const) : []);
  for (const word of new Set([...words, ...expansions, ...[...related.values()].flat().map((r) => r.term)])) {
    if (!/^[a-z]+$/.test(word)) continue;
    const ndoc = index.documentFrequency(word);
    if (ndoc !== undefined) {
      docFreq.set(word, ndoc);
      continue;
    }
    // A word the vocabulary knows by itself ("lakers") is not corrected: its expansions say what it means.
    if (word.length < 4 || !words.includes(word) || (discovery && wordExpansions(word).length > 0)) continue;
    const best = index.closestWord(word);
    // In a task, an English word the catalog lacks is no typo: its WordNet relatives say what it means. A
    // correction to another word would change it ("bottle" -> "bottlenecks", "baking" -> "banking", "scam" ->
    // "sca"); one to another form of it stays ("kids" -> "kid").
    const own = index.lexeme(word);
    if (best && discovery && (own === null || own !== index.lexeme(best.word)) && isEnglishWord(word)) continue;
    if (best) {
      corrections[word] = best.word;
      docFreq.set(best.word, best.ndoc);
    }
  }
  const idf = (term: string) => Math.log(1 + totalApis / (1 + (docFreq.get(term) ?? 0)));
  const expansionsFor = (word: string) => (discovery ? wordExpansions(word) : []);
  // Each concept group: the word, its correction and vocabulary expansions (full weight), then its
  // WordNet relatives, none weighing more than its factor times the word's own weight (a rare
  // relative must not become the measure of the group it joined).
  const groupTerms = words.map((w) => {
    const terms = new Map<string, number>();
    for (const t of [w, ...(corrections[w] ? [corrections[w]] : []), ...expansionsFor(w)]) terms.set(t, 1);
    const own = Math.max(...[...terms.keys()].map(idf));
    for (const r of related.get(w) ?? []) if (!terms.has(r.term)) terms.set(r.term, Math.min(r.factor, (r.factor * own) / idf(r.term)));
    return terms;
  });
  // Phrase expansions ("text message" -> sms) form one more concept group of their own.
  const phraseTerms = expansions.filter((t) => !groupTerms.some((g) => g.has(t)));
  if (phraseTerms.length) groupTerms.push(new Map(phraseTerms.map((t) => [t, 1])));
  const relatedAdded = [
    ...new Set(groupTerms.flatMap((g) => [...g].filter(([t, f]) => f < 1 && !words.includes(t) && !expansions.includes(t)).map(([t]) => t))),
  ];
  const all = [...new Set([...words, ...Object.values(corrections), ...expansions, ...groupTerms.flatMap((g) => [...g.keys()])])];
  // Each term weighs its IDF ("sentiment" says more than "analyze") times its factor; a concept
  // group counts with the weight of its best matched term, relative to its best possible one.
  const terms = groupTerms.flatMap((g, gi) => [...g].map(([term, factor]) => ({ group: gi, term, weight: idf(term) * factor, factor })));
  const factors = new Map<string, number>();
  for (const t of terms) factors.set(t.term, Math.max(factors.get(t.term) ?? 0, t.factor));
  // Candidates come from the selective terms only (a word in most APIs, like "add", would pull in
  // hundreds of rows to score); common terms still count in the score of every candidate.
  const selectiveTerms = all.filter((t) => (docFreq.get(t) ?? 0) <= totalApis * 0.06);
  return {
    words,
    corrections,
    expansions: [...expansions, ...relatedAdded.filter((t) => !expansions.includes(t))],
    groups: groupTerms.map((g) => [...g.keys()].join(' | ')),
    termGroups: terms.map((t) => t.group),
    terms: terms.map((t) => t.term),
    weights: terms.map((t) => t.weight),
    factors: terms.map((t) => t.factor),
    termFactors: all.map((t) => factors.get(t) ?? 1),
    any: all.join(' | '),
    selective: (selectiveTerms.length ? selectiveTerms : all).join(' | '),
    raw: words.join(' '),
  };
}

export interface RankedRow extends ApiSummaryRow {
  score: number;
  coverage: number;
  /** The index entry the row was read from (stable until the index reloads): lets callers memoize renderings. */
  indexed?: IndexedApi;
}

interface RankOptions {
  category?: string | undefined;
  only?: ReadonlySet<string> | undefined;
  limit: number;
  offset: number;
}

const lexemesOf = (index: DirectoryIndex, terms: string[]) => [...new Set(terms.map((t) => index.lexeme(t)).filter((l): l is string => l !== null))];

/** Ranks APIs for a plan in the in-process index; see DirectoryIndex.rank for the formula. */
function rank(index: DirectoryIndex, plan: QueryPlan, options: RankOptions): RankedRow[] {
  const lexemeWeights = new Map<string, number>();
  plan.any.split(' | ').forEach((term, k) => {
    const lexeme = index.lexeme(term);
    if (lexeme !== null) lexemeWeights.set(lexeme, Math.max(lexemeWeights.get(lexeme) ?? 0, plan.termFactors[k] ?? 1));
  });
  const terms = plan.terms.map((term, i) => ({ group: plan.termGroups[i]!, lexeme: index.lexeme(term), weight: plan.weights[i]! }));
  const hits = index.rank(
    {
      lexemes: [...lexemeWeights.keys()],
      lexemeWeights: [...lexemeWeights.values()],
      selective: lexemesOf(index, plan.selective.split(' | ')),
      terms,
      raw: plan.raw,
      category: options.category,
      only: options.only,
    },
    options.offset + options.limit,
  );
  return hits.slice(options.offset, options.offset + options.limit).map(({ api, score, coverage }) => rankedRow(api, score, coverage));
}

function rankedRow(api: IndexedApi, score: number, coverage: number): RankedRow {
  return {
    id: api.id,
    name: api.name,
    provider: api.provider,
    service: api.service,
    categories: api.categories,
    description: api.description,
    price_micros: api.price_micros,
    pricing_rules: api.pricing_rules,
    featured: api.featured,
    votes_up: api.votes_up,
    votes_down: api.votes_down,
    score,
    coverage,
    indexed: api,
  };
}

function categoryCondition(db: Db, category: string | undefined) {
  if (!category) return db``;
  return category === UNCATEGORIZED ? db`and cardinality(a.categories) = 0` : db`and ${category} = any(a.categories)`;
}

export interface ListOptions {
  q?: string | undefined;
  category?: string | undefined;
  /** Only these API ids (callable=true), or any. */
  only?: ReadonlySet<string> | undefined;
  limit: number;
  cursor?: string | undefined;
}

export interface ApiPage {
  apis: ApiSummaryRow[];
  nextCursor: string | null;
  plan: QueryPlan | null;
  /** True when the page was limited to the APIs the caller can call now. */
  callableOnly?: boolean;
}

/** Search by relevance in the in-process index, optionally within a category. */
export async function searchApis(index: LiveDirectoryIndex, options: ListOptions & { q: string }): Promise<ApiPage> {
  const offset = decodeCursor(options.cursor);
  const normalized = checkQueryText(options.q);
  const ranked = await index.get();
  const plan = planQuery(ranked, normalized, false);
  const rows = rank(ranked, plan, { category: options.category, only: options.only, limit: options.limit + 1, offset });
  const page = rows.slice(0, options.limit);
  return {
    apis: page,
    nextCursor: rows.length > options.limit ? encodeCursor(offset + options.limit) : null,
    plan,
    callableOnly: options.only !== undefined,
  };
}

/**
 * The orders of browsing (GET /apis without q): `name` (A to Z), `price` (cheapest first), `votes`
 * (most useful first: up minus down) and `popular` (most distinct calling accounts in the last
 * POPULAR_WINDOW_DAYS days, then most calls; see docs/decisions/directory-browse-sorts.md). Without
 * a sort, featured APIs come first, then by name. Ties always fall back to the name, then the id.
 */
export const BROWSE_SORTS = ['name', 'price', 'votes', 'popular'] as const;
export type BrowseSort = (typeof BROWSE_SORTS)[number];
export const POPULAR_WINDOW_DAYS = 30;

type KeyType = 'int' | 'bigint' | 'text';
type KeyValue = number | string;

/**
 * Each order as a tuple of ascending keys (a descending figure is negated), the id last: a page
 * starts after the previous page's last tuple (keyset paging), so pages never repeat or skip an API
 * while the keys stay as they were.
 */
const BROWSE_KEYS: Record<BrowseSort | 'featured', (db: Db) => { expr: SqlFragment; type: KeyType }[]> = {
  featured: (db) => [
    { expr: db`case when a.featured then 0 else 1 end`, type: 'int' },
    { expr: db`lower(a.name)`, type: 'text' },
  ],
  name: (db) => [{ expr: db`lower(a.name)`, type: 'text' }],
  price: (db) => [
    { expr: db`a.price_micros`, type: 'bigint' },
    { expr: db`lower(a.name)`, type: 'text' },
  ],
  votes: (db) => [
    { expr: db`(coalesce(v.down, 0) - coalesce(v.up, 0))::int`, type: 'int' },
    { expr: db`lower(a.name)`, type: 'text' },
  ],
  popular: (db) => [
    { expr: db`-coalesce(u.accounts, 0)::int`, type: 'int' },
    { expr: db`-coalesce(u.calls, 0)::bigint`, type: 'bigint' },
    { expr: db`lower(a.name)`, type: 'text' },
  ],
};

interface BrowseCursor {
  sort: BrowseSort | 'featured';
  keys: KeyValue[];
  id: string;
}

/** Opaque keyset cursor: base64url of {"s": sort, "k": [sort keys], "i": id}. */
function encodeBrowseCursor(cursor: BrowseCursor): string {
  return Buffer.from(JSON.stringify({ s: cursor.sort, k: cursor.keys, i: cursor.id })).toString('base64url');
}

const badCursor = (hint = 'Pass the nextCursor of a previous page unchanged, or omit it.') =>
  new PlatformError('validation_failed', 'cursor is not valid', { hint });

function decodeBrowseCursor(cursor: string, sort: BrowseSort | 'featured', types: KeyType[]): BrowseCursor {
  let value: { s?: unknown; k?: unknown; i?: unknown };
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as typeof value;
  } catch {
    throw badCursor();
  }
  if (value === null || typeof value !== 'object') throw badCursor();
  if (typeof value.s === 'string' && value.s !== sort) {
    throw badCursor(
      `This cursor continues a listing in another order (sort=${value.s === 'featured' ? '' : value.s}); keep the same sort while paging, or omit the cursor.`,
    );
  }
  const keys = value.k;
  if (value.s !== sort || typeof value.i !== 'string' || !Array.isArray(keys) || keys.length !== types.length) throw badCursor();
  const valid = types.every((type, n) => {
    const key: unknown = keys[n];
    if (type === 'int') return typeof key === 'number' && Number.isSafeInteger(key);
    if (type === 'bigint') return typeof key === 'string' && /^-?\d{1,19}$/.test(key);
    return typeof key === 'string' && key.length <= 1000;
  });
  if (!valid) throw badCursor();
  return { sort, keys: keys as KeyValue[], id: value.i };
}

/** A key as the cursor carries it: a bigint as its decimal text (JSON has no 64-bit integers). */
const keyValue = (value: KeyValue | bigint | undefined): KeyValue => (typeof value === 'bigint' ? String(value) : (value ?? ''));

const joinSql = (db: Db, parts: SqlFragment[]) => parts.reduce((all, part) => db`${all}, ${part}`);

/**
 * Browse (featured first, then by name; or in a BROWSE_SORTS order) or search (by relevance),
 * optionally within a category.
 */
export async function listApis(db: Db, index: LiveDirectoryIndex, options: ListOptions & { sort?: BrowseSort | undefined }): Promise<ApiPage> {
  if (options.q !== undefined) return searchApis(index, { ...options, q: options.q });
  const sort = options.sort ?? 'featured';
  const keys = BROWSE_KEYS[sort](db);
  const types = keys.map((k) => k.type);
  const after = options.cursor ? decodeBrowseCursor(options.cursor, sort, types) : null;
  const columns = joinSql(
    db,
    keys.map((k, n) => db`${k.expr} as ${db(`k${n}`)}`),
  );
  const tuple = joinSql(db, [...keys.map((_, n) => db`s.${db(`k${n}`)}`), db`s.id`]);
  const values = after
    ? joinSql(db, [
        ...after.keys.map((v, n) => (types[n] === 'text' ? db`${v}::text` : types[n] === 'bigint' ? db`${v}::bigint` : db`${v}::int`)),
        db`${after.id}::text`,
      ])
    : null;
  const popular =
    sort === 'popular'
      ? db`left join (
             select api_id, count(distinct account_id) as accounts, sum(calls) as calls
               from usage_daily
              where day >= current_date - ${POPULAR_WINDOW_DAYS}::int and calls > 0
              group by api_id) u on u.api_id = a.id`
      : db``;
  const rows = await db<(ApiSummaryRow & { [key: `k${number}`]: KeyValue | bigint })[]>`
    select * from (
      select ${SUMMARY_COLUMNS(db)}, ${columns}
        from apis a
        ${VOTES_JOIN(db)}
        ${popular}
       where true ${categoryCondition(db, options.category)} ${options.only === undefined ? db`` : db`and a.id = any(${[...options.only]})`}
    ) s
     where ${values === null ? db`true` : db`(${tuple}) > (${values})`}
     order by ${tuple}
     limit ${options.limit + 1}`;
  const page = rows.slice(0, options.limit);
  const apis = page.map(({ id, name, provider, service, categories, description, price_micros, pricing_rules, featured, votes_up, votes_down }) => ({
    id,
    name,
    provider,
    service,
    categories,
    description: cutAtWord(description, SUMMARY_DESCRIPTION_LENGTH),
    price_micros,
    pricing_rules,
    featured,
    votes_up,
    votes_down,
  }));
  const last = page.at(-1);
  return {
    apis,
    nextCursor:
      rows.length > options.limit && last ? encodeBrowseCursor({ sort, keys: keys.map((_, n) => keyValue(last[`k${n}`])), id: last.id }) : null,
    plan: null,
    callableOnly: options.only !== undefined,
  };
}

export async function getApi(db: Db, id: string): Promise<ApiDetailRow | null> {
  const [row] = await db<ApiDetailRow[]>`
    select a.id, a.name, a.provider, a.service, a.categories, a.description, a.price_micros, a.pricing_rules, a.featured,
           coalesce(v.up, 0)::int as votes_up, coalesce(v.down, 0)::int as votes_down,
           a.version, a.base_url, a.auth_scheme, a.oauth, a.oauth_provider, a.key_docs_url,
           a.endpoints, a.endpoint_count, a.byok_price_micros,
           a.platform_key_encrypted is not null as has_platform_key, a.source, a.instructions
      from apis a
      ${VOTES_JOIN(db)}
     where a.id = ${id}`;
  return row ?? null;
}

export interface CategoryRow {
  id: string;
  api_count: number;
}

/**
 * Every category with its API count; APIs the source leaves uncategorized count under
 * "uncategorized". `source` limits the count to imported or operator rows.
 */
export async function listCategories(db: Db, source?: 'apis.guru' | 'operator'): Promise<CategoryRow[]> {
  return db<CategoryRow[]>`
    select category as id, count(*)::int as api_count
      from (select unnest(case when cardinality(categories) = 0 then array[${UNCATEGORIZED}] else categories end) as category
              from apis where ${source ?? null}::text is null or source = ${source ?? null}) c
     group by category
     order by api_count desc, category`;
}

export async function categoryExists(db: Db, category: string): Promise<boolean> {
  const [row] = await db`
    select 1 from apis a where true ${categoryCondition(db, category)} limit 1`;
  return row !== undefined;
}

/** "machine_learning" -> "Machine learning". */
export const categoryName = (id: string) => (id.charAt(0).toUpperCase() + id.slice(1)).replace(/_/g, ' ');

/** What of an API matched the task, for a person to read (no scores). */
export interface DiscoveryMatch {
  /** Up to three endpoints whose summary or path names the task's words, best first. */
  endpoints: { method: string; path: string; summary: string }[];
  /** The sentence of the description that names the most of the task's words, or null. */
  sentence: string | null;
}

/** An operation of a discovered API that does the task: what to call, and what one call costs. */
export interface DiscoveryOperation {
  method: string;
  path: string;
  summary: string;
  /** The price of one call on this path in micro-dollars: its pricing rule's, else the API's. */
  priceMicros: bigint;
}

export interface DiscoveryResult {
  api: ApiSummaryRow;
  score: number;
  reason: string;
  matched: DiscoveryMatch;
  /** Up to three operations matching the task, best first (empty when none names its words). */
  operations: DiscoveryOperation[];
}

/** The description's sentence naming the most of the terms (word-prefix match), or null when none does. */
export function matchingSentence(description: string, stems: readonly string[]): string | null {
  let best: string | null = null;
  let bestHits = 0;
  for (const sentence of description.split(/(?<=[.!?])\s+/)) {
    const words = sentence.toLowerCase().split(/[^a-z0-9]+/);
    const hits = stems.filter((stem) => words.some((w) => w.startsWith(stem))).length;
    if (hits > bestHits) {
      best = sentence.trim();
      bestHits = hits;
    }
  }
  return best;
}

export interface Discovery {
  results: DiscoveryResult[];
  plan: QueryPlan;
  /** The kinds of service (capabilities.ts ids) the task was read as: the closest one and those its need names. */
  capabilities: string[];
}

/** The lower-cased text a reason looks for the query's words in (once per API and index load). */
const reasonText = (api: ApiSummaryRow) =>
  `${api.name} ${api.provider} ${api.service ?? ''} ${api.categories.join(' ')} ${api.description}`.toLowerCase();

/**
 * Dense retrieval in discovery (docs/DISCOVERY.md): the word ranking's top FUSION_DEPTH and the
 * FUSION_DEPTH APIs nearest to the task by sentence embedding, scored together as the word score plus
 * DENSE_WEIGHT times the cosine similarity (a linear fusion; an API only the model found has no word
 * score). An API counts as near from DENSE_MIN_SIMILARITY: below it the model relates everything a
 * little (made-up words reach 0.34 with some API). When no word of the task matched, only an API at
 * DENSE_ALONE_MIN_SIMILARITY or more is shown, so a task of unknown words still finds nothing.
 */
export const DENSE_WEIGHT = 5;
const FUSION_DEPTH = 50;
export const DENSE_MIN_SIMILARITY = 0.3;
export const DENSE_ALONE_MIN_SIMILARITY = 0.4;
/**
 * When no word of the task matched but every one of them is an English word (WordNet knows it), the
 * closest capability counts from this similarity instead of DENSE_ALONE_MIN_SIMILARITY: a plain task
 * in words no API uses ("a dinner I can make with chicken and rice": recipes at 0.31) is answered by
 * its kind of service, while made-up words (which reach 0.38 with some capability) still find nothing.
 */
export const CAPABILITY_ENGLISH_ALONE_MIN_SIMILARITY = 0.3;

interface FusedRow {
  row: RankedRow;
  /** Cosine similarity of the task and the API, when it is at least DENSE_MIN_SIMILARITY. */
  similarity: number | null;
}

/**
 * The capability layer (capabilities.ts): when the task is close in meaning to a capability's
 * description (cosine >= CAPABILITY_MIN_SIMILARITY; the CAPABILITY_TOP closest), its member APIs
 * join the candidates and gain CAPABILITY_WEIGHT x that similarity. With the broader layer (about
 * 120 kinds of service) the closest one alone, weighed 2.5, gained on every tuning set; weights 1.5
 * to 3 are a plateau (docs/DISCOVERY.md).
 */
export const CAPABILITY_WEIGHT = 2.5;

/**
 * The capability's kin (capabilities.ts, `capabilityKin`): an API whose own embedding is at least
 * CAPABILITY_KIN_MIN_SIMILARITY from the description of a capability the task asks for joins the
 * candidates and gains CAPABILITY_KIN_WEIGHT x the task's closeness to the capability x the API's, member
 * or not. Members are found by words, which APIs of another kind hold too; this favours those that are
 * of the kind in meaning (Google Safe Browsing for a scam link, TomTom's routing for a drive with
 * traffic). Only when no API's words cover the task (every word of it the catalog knows): when one does,
 * the task's own words have said what it needs ("validate a phone number", "real estate listings"), and the
 * kind is left to them.
 * Chosen on the tuning sets (docs/DISCOVERY.md, "a tenth session").
 */
export const CAPABILITY_KIN_WEIGHT = 3;
/**
 * The closest capability's kin counts from this similarity of the task to it, where its members (by words)
 * need CAPABILITY_MIN_SIMILARITY: "how long is the drive from Lyon to Geneva and which way should I go" is
 * 0.2-0.35 from routing, its names pulling it away, and the kin's boost is scaled by that closeness anyway.
 * Only when some word of the task matched (made-up words keep their floors). 0.3, 0.25 and 0.2 measured on
 * the tuning sets: 0.25 and 0.2 alike, 0.3 between them and 0.35 (docs/DISCOVERY.md, "a tenth session").
 */
const CAPABILITY_KIN_FLOOR = 0.25;

/**
 * Discovery's feedback (feedback.ts): a candidate gains FEEDBACK_WEIGHT x its signal in [0, 1], which
 * grows with the logarithm of the accounts that used the API in the last 30 days (those that called it
 * after discovery listed it count twice) and reaches 1 at 1,000. At full strength it is worth 0.06 of
 * cosine similarity in the fusion (DENSE_WEIGHT 5): it orders close candidates and lifts no API that
 * does not match the task into the results (docs/decisions/discovery-feedback.md).
 */
export const FEEDBACK_WEIGHT = 0.3;
/** From how many accounts a result's reason says how many used it (fewer would tell of single accounts). */
const FEEDBACK_REASON_MIN_ACCOUNTS = 3;
const CAPABILITY_MIN_SIMILARITY = 0.35;
const CAPABILITY_TOP = 1;
/** Per index, its capability vectors as one row-major matrix (a tight loop over one array, no allocation per task). */
const capabilityMatrices = new WeakMap<DirectoryIndex, Float32Array>();

function capabilityMatrix(index: DirectoryIndex, vectors: readonly Float32Array[]): Float32Array {
  let matrix = capabilityMatrices.get(index);
  if (!matrix) {
    const d = vectors[0]?.length ?? 0;
    matrix = new Float32Array(vectors.length * d);
    vectors.forEach((v, c) => matrix!.set(v, c * d));
    capabilityMatrices.set(index, matrix);
  }
  return matrix;
}

/**
 * A capability a task's wording states as its need (vocabulary.ts, NEED_PHRASES and the need verbs: "text my
 * ...", "sign the ...") counts as if the task were this close to its description, unless it is closer: its members
 * join the candidates with CAPABILITY_WEIGHT x 0.8, outweighing words of the task's setting ("team",
 * "practice", "rain"). 0.4 to 0.55 measured alike on the tuning sets with the first phrases, 0.6 to 0.8 gained
 * three to four tasks more with the rest, and 0.6 was kept (docs/DISCOVERY.md, "a seventh session"). Since a
 * need the wording states leaves out the closest capability in meaning when it is another ("a twelfth
 * session"), 0.7 and 0.8 each gained tasks over 0.6 with none lost (0.8: seven), and 0.9 to 1.2 began to lose
 * some: 0.8.
 */
const NEED_SIMILARITY = 0.8;
/**
 * A capability a named thing implies (a team's or an artist's name: vocabulary.ts, `taskNeeds().named`) counts
 * as this close: it says what the task is about, not what it asks ("songs similar to Radiohead" asks for
 * music recommendations). 0.6, as stated needs counted before the twelfth session. A sure identifier's kind
 * (`taskNeeds().sure`: a plate's vehicle records) counts as NEED_SIMILARITY.
 */
const NAMED_SIMILARITY = 0.6;

/**
 * The capabilities that apply to a task (`used`, their places in CAPABILITIES) and, per API (position),
 * the task's similarity to the closest of them it belongs to, times how much of that kind it offers (`boosts`;
 * memberDepth). `min` is
 * CAPABILITY_MIN_SIMILARITY, or CAPABILITY_ENGLISH_ALONE_MIN_SIMILARITY / DENSE_ALONE_MIN_SIMILARITY when no
 * word of the task matched (capabilityFloor): made-up words come close to a capability too ("qzxqvjw"
 * reaches 0.38 with QR codes' description). The capabilities the task names by its need (`needs`) count
 * from NEED_SIMILARITY (those a named thing implies from NAMED_SIMILARITY). With `kin` (null when an API's words cover the task), per API of the kind of one of
 * them in meaning (`kin`), the task's closeness to it times the API's (the best); the closest capability's
 * kin counts from `kin.floor` (CAPABILITY_KIN_FLOOR when a word matched), which may be under `min`: such a
 * capability is used for its kin alone.
 */
function taskCapabilities(
  index: DirectoryIndex,
  task: Float32Array | null,
  min: number,
  needs: { stated: readonly string[]; sure: readonly string[]; all: readonly string[] },
  kinOptions: { floor: number } | null,
): { boosts: Map<number, number>; kin: Map<number, number>; used: number[]; kinds: Map<number, number[]> } {
  const boosts = new Map<number, number>();
  const used: number[] = [];
  // Per API boosted (position), the capabilities it was boosted for, as a member or as kin (for its reason).
  const kinds = new Map<number, number[]>();
  const of = (at: number, c: number) => {
    const list = kinds.get(at);
    if (!list) kinds.set(at, [c]);
    else if (!list.includes(c)) list.push(c);
  };
  // Per capability whose kin counts, how close the task is to it (a need the wording states counts as NEED_SIMILARITY,
  // one a named thing implies as NAMED_SIMILARITY).
  const closeness = new Map<number, number>();
  const vectors = index.capabilityVectors;
  const members = index.capabilityMembers;
  // The closest capability needs the model; the ones the task's wording names do not.
  // A need the wording states outright is the task's need: the closest capability in meaning, when another,
  // is left out (it was the setting's: "who registered this website's domain" is closest to domain availability).
  const stated = new Set(needs.stated.flatMap((id) => CAPABILITY_AT.get(id) ?? []));
  for (const { c, similarity } of task && vectors && vectors.length > 0 ? closestCapabilities(index, vectors, task) : []) {
    if (stated.size > 0 && !stated.has(c)) continue;
    if (similarity >= min) {
      for (const at of members[c]!) {
        if (!boosts.has(at)) boosts.set(at, similarity * memberDepth(index, c, at));
        of(at, c);
      }
    } else if (!kinOptions || similarity < kinOptions.floor) continue;
    used.push(c);
    closeness.set(c, similarity);
  }
  for (const id of needs.all) {
    const c = CAPABILITY_AT.get(id);
    if (c === undefined) continue;
    if (!used.includes(c)) used.push(c);
    const similarity = stated.has(c) || needs.sure.includes(id) ? NEED_SIMILARITY : NAMED_SIMILARITY;
    closeness.set(c, Math.max(closeness.get(c) ?? 0, similarity));
    for (const at of members[c]!) {
      boosts.set(at, Math.max(boosts.get(at) ?? 0, similarity * memberDepth(index, c, at)));
      of(at, c);
    }
  }
  // The APIs of each such kind in meaning (with the model): the task's closeness to the kind times theirs.
  const kin = new Map<number, number>();
  const kinLists = index.capabilityKin;
  if (kinLists && kinOptions)
    for (const [c, taskSimilarity] of closeness) {
      const { at, similarity } = kinLists[c]!;
      for (let k = 0; k < at.length; k++) {
        kin.set(at[k]!, Math.max(kin.get(at[k]!) ?? 0, taskSimilarity * similarity[k]!));
        of(at[k]!, c);
      }
    }
  return { boosts, kin, used, kinds };
}

/**
 * How much of a member's boost depends on how much of its kind it offers (the index's `capabilityDepth`): a member
 * with one operation for the kind gets 0.79 of it (0.7 with none), one with eight or more all of it. Measured over the
 * fourteen tuning sets (docs/DISCOVERY.md, "a fifteenth session"): 0.15 and 0.45 gained less, and counting only
 * operations that name every word of a word set lost (a kind's members by their own text often have none).
 */
const CAPABILITY_DEPTH_WEIGHT = 0.3;

function memberDepth(index: DirectoryIndex, c: number, at: number): number {
  return 1 - CAPABILITY_DEPTH_WEIGHT + CAPABILITY_DEPTH_WEIGHT * (index.capabilityDepth[c]!.get(at) ?? 0);
}

/** Each capability's place in CAPABILITIES (and in the index's capabilityMembers), by id. */
const CAPABILITY_AT = new Map(CAPABILITIES.map((c, i) => [c.id, i]));

/**
 * Per index, the closest capabilities of each task vector: a remembered task's vector is the same
 * object each time (QueryEmbeddings), so a repeated task skips the products.
 */
const closestMemo = new WeakMap<DirectoryIndex, WeakMap<Float32Array, { c: number; similarity: number }[]>>();

function closestCapabilities(index: DirectoryIndex, vectors: readonly Float32Array[], task: Float32Array): { c: number; similarity: number }[] {
  let memo = closestMemo.get(index);
  if (!memo) closestMemo.set(index, (memo = new WeakMap()));
  const known = memo.get(task);
  if (known) return known;
  const matrix = capabilityMatrix(index, vectors);
  const d = task.length;
  // The CAPABILITY_TOP most similar capabilities, best first (a short insertion list: no sort of all).
  const best: { c: number; similarity: number }[] = [];
  for (let c = 0, row = 0; c < vectors.length; c++, row += d) {
    if (CAPABILITIES[c]!.statedOnly) continue;
    let dot = 0;
    for (let k = 0; k < d; k++) dot += matrix[row + k]! * task[k]!;
    // The lowest floor any task has, the kin's (taskCapabilities applies each task's own).
    if (dot < CAPABILITY_KIN_FLOOR || (best.length === CAPABILITY_TOP && dot <= best[CAPABILITY_TOP - 1]!.similarity)) continue;
    let place = best.length;
    while (place > 0 && dot > best[place - 1]!.similarity) place--;
    best.splice(place, 0, { c, similarity: dot });
    if (best.length > CAPABILITY_TOP) best.pop();
  }
  memo.set(task, best);
  return best;
}

/**
 * What an API's fused score is multiplied by when its description says only some developers may use it, or that
 * it is withdrawn (`restrictedAccess` in index-loader.ts): an agent cannot call eBay's limited-release logistics, so
 * it ranks below ShipEngine for a parcel. Such an API is still found when nothing open does the task.
 */
const RESTRICTED_FACTOR = 0.8;

/**
 * The lists fused: word score + DENSE_WEIGHT x similarity (a negative similarity counts 0) +
 * CAPABILITY_WEIGHT x the member's boost for a capability it belongs to + CAPABILITY_KIN_WEIGHT x
 * its kin score (taskCapabilities), times RESTRICTED_FACTOR for a restricted API, divided by the best such score so
 * that the first result is 1. Ties go to the word ranking's order. Without the model (`similarities` null) only the
 * word score counts.
 */
function fuse(
  index: DirectoryIndex,
  lexical: RankedRow[],
  similarities: Float32Array | null,
  capabilities: { boosts: ReadonlyMap<number, number>; kin: ReadonlyMap<number, number> },
  limit: number,
  only: ReadonlySet<string> | undefined,
  feedback: Float32Array | null,
): FusedRow[] {
  const fused = new Map<string, { row: RankedRow; score: number; lexical: number; similarity: number }>();
  const add = (row: RankedRow, at: number | undefined, order: number) => {
    const similarity = at === undefined || !similarities ? 0 : similarities[at]!;
    const restricted = at !== undefined && index.apis[at]!.restricted ? RESTRICTED_FACTOR : 1;
    const score =
      restricted *
      (row.score +
        DENSE_WEIGHT * Math.max(similarity, 0) +
        (at === undefined
          ? 0
          : CAPABILITY_WEIGHT * (capabilities.boosts.get(at) ?? 0) +
            CAPABILITY_KIN_WEIGHT * (capabilities.kin.get(at) ?? 0) +
            (feedback ? FEEDBACK_WEIGHT * feedback[at]! : 0)));
    fused.set(row.id, { row, score, lexical: order, similarity });
  };
  lexical.forEach((row, r) => add(row, index.position(row.id), r));
  if (similarities) {
    for (const { at } of nearestOf(similarities, FUSION_DEPTH, lexical.length > 0 ? DENSE_MIN_SIMILARITY : DENSE_ALONE_MIN_SIMILARITY)) {
      const api = index.apis[at]!;
      if (only !== undefined && !only.has(api.id)) continue;
      if (!fused.has(api.id)) add(rankedRow(api, 0, 0), at, Number.POSITIVE_INFINITY);
    }
  }
  for (const at of [...capabilities.boosts.keys(), ...capabilities.kin.keys()]) {
    const api = index.apis[at]!;
    if ((only === undefined || only.has(api.id)) && !fused.has(api.id)) add(rankedRow(api, 0, 0), at, Number.POSITIVE_INFINITY);
  }
  const ranked = [...fused.values()].sort((a, b) => b.score - a.score || a.lexical - b.lexical || (a.row.id < b.row.id ? -1 : 1)).slice(0, limit);
  const best = ranked[0]?.score || 1;
  return ranked.map((e) => ({
    row: { ...e.row, score: e.score / best },
    similarity: e.similarity >= DENSE_MIN_SIMILARITY ? e.similarity : null,
  }));
}

/** The similarity from which the closest capability counts (see CAPABILITY_ENGLISH_ALONE_MIN_SIMILARITY). */
function capabilityFloor(plan: QueryPlan, wordsMatched: boolean): number {
  if (wordsMatched) return CAPABILITY_MIN_SIMILARITY;
  const english = plan.words.length > 0 && plan.words.every((word) => /^[a-z]+$/.test(word) && isEnglishWord(word));
  return english ? CAPABILITY_ENGLISH_ALONE_MIN_SIMILARITY : DENSE_ALONE_MIN_SIMILARITY;
}

/**
 * Natural-language discovery: the APIs that can do the task, best first, each with a reason.
 * `feedback: false` ranks without the accounts' use (the evaluation: the tuning sets measure relevance,
 * not a database's own traffic).
 */
export async function discover(
  live: LiveDirectoryIndex,
  q: string,
  limit = 10,
  only?: ReadonlySet<string>,
  options: { feedback?: boolean } = {},
): Promise<Discovery> {
  const normalized = checkQueryText(q, 'q');
  const index = await live.get();
  const plan = planQuery(index, normalized, true);
  const lexical = rank(index, plan, { limit: FUSION_DEPTH, offset: 0, only });
  // One embedding of the task serves both the APIs' similarities and the capabilities'.
  const dense = index.dense && live.embeddings ? await live.embeddings.match(index.dense, normalized) : null;
  // Whether one API's words cover the task (every word the catalog knows: the word ranking's coverage is 1;
  // CAPABILITY_KIN_WEIGHT): then the kin is left out.
  const wordsCoverTask = lexical.some((row) => row.coverage >= 1 - 1e-9);
  const floor = capabilityFloor(plan, lexical.length > 0);
  const capabilities = taskCapabilities(
    index,
    dense?.vector ?? null,
    floor,
    taskNeeds(normalized, q),
    wordsCoverTask ? null : { floor: lexical.length > 0 ? CAPABILITY_KIN_FLOOR : floor },
  );
  const rows = fuse(index, lexical, dense?.similarities ?? null, capabilities, limit, only, options.feedback === false ? null : index.feedback);
  const understood = capabilities.used.map((c) => CAPABILITIES[c]!.id);
  if (rows.length === 0) return { results: [], plan, capabilities: understood };
  // Endpoints that name the most query terms (word-prefix match, which covers word forms cheaply).
  const stems = [...new Set([...plan.words, ...Object.values(plan.corrections), ...plan.expansions])]
    .filter((t) => t.length >= 3 && !DISCOVERY_STOPWORDS.has(t))
    .map((t) => (t.length > 5 ? t.slice(0, t.length - 2) : t));
  const matchedTerms = [...new Set([...plan.words, ...Object.values(plan.corrections), ...plan.expansions])];
  // Every operation is a retrieval unit of its own (operation-index.ts): each result names its best. The
  // terms of the capabilities that apply count too, each a group of its own at half a task word's factor (three
  // of them outweigh one word of the task, one does not): "find an hour when the team has nothing booked" names
  // the calendar's free/busy operation, a word of none of the task's.
  const taskLexemes = new Set(plan.terms.map((t) => index.lexeme(t)));
  const capabilityLexemes = [...new Set(capabilities.used.flatMap((c) => CAPABILITIES[c]!.terms.split(' ')).map((t) => index.lexeme(t)))].filter(
    (l) => l !== null && !taskLexemes.has(l),
  );
  const firstGroup = plan.termGroups.length ? Math.max(...plan.termGroups) + 1 : 0;
  const operationQuery = index.operations.query([
    ...plan.terms.map((term, i) => ({ group: plan.termGroups[i]!, lexeme: index.lexeme(term), factor: plan.factors[i]! })),
    ...capabilityLexemes.map((lexeme, k) => ({ group: firstGroup + k, lexeme, factor: 0.5 })),
  ]);
  const results = rows.map(({ row, similarity }) => {
    const api = row.indexed ?? index.api(row.id);
    const at = index.position(row.id);
    const best = at === undefined ? null : index.operations.best(at, operationQuery).operations;
    // The operations that name the task best (BM25 over operations), else those naming most of its words.
    const endpoints = api ? (best?.length ? best.map((k) => api.endpoints[k]!) : index.matchingEndpoints(api, stems)) : [];
    const parts: string[] = [];
    const hay = api ? (api.reasonText ??= reasonText(api)) : reasonText(row);
    const inDescription = matchedTerms.filter((t) => hay.includes(t)).slice(0, 6);
    if (inDescription.length) parts.push(`matches ${inDescription.map((t) => `"${t}"`).join(', ')} in its name, categories or description`);
    const kinds = at === undefined ? undefined : capabilities.kinds.get(at);
    // Why it was ranked, not what it is: a member by words or an API close in meaning to the kind may do something else.
    if (kinds) parts.push(`ranked for the kind of service the task reads as: ${kinds.map((c) => CAPABILITIES[c]!.id.replace(/-/g, ' ')).join(', ')}`);
    if (endpoints.length)
      parts.push(`endpoints: ${endpoints.map((e) => `${e.method} ${e.path}${e.summary ? ` (${e.summary.slice(0, 80)})` : ''}`).join('; ')}`);
    if (similarity !== null) parts.push(`what it does is close in meaning to the task (similarity ${similarity.toFixed(2)})`);
    if (api?.restricted) parts.push('ranked lower: its description says it is open only to some developers, or withdrawn');
    const users = options.feedback === false || at === undefined ? 0 : index.feedbackAccounts[at]!;
    if (users >= FEEDBACK_REASON_MIN_ACCOUNTS) parts.push(`used by ${users} accounts in the last 30 days`);
    // Words matched that the parts above cannot show: another form of a word ("studies" for "study"), or one
    // past the description's start the index keeps (the word ranking read all of it). With no word matched, it was the name.
    if (parts.length === 0)
      parts.push(row.coverage > 0 ? "matches forms of the task's words in its description or operations" : 'name resembles the query');
    const matched: DiscoveryMatch = {
      endpoints: endpoints.map((e) => ({ method: e.method, path: e.path, summary: e.summary })),
      sentence: matchingSentence(row.description, stems),
    };
    const rules = api?.pricingRules ?? [];
    const operations = endpoints.map((e) => ({
      method: e.method,
      path: e.path,
      summary: e.summary,
      priceMicros: operationPriceMicros(rules, row.price_micros, e.method, e.path),
    }));
    return { api: row, score: Math.round(row.score * 1000) / 1000, reason: parts.join('; '), matched, operations };
  });
  return { results, plan, capabilities: understood };
}
