/**
 * Dense retrieval for discovery: a sentence embedding of every API (all-MiniLM-L6-v2, int8, run by
 * onnxruntime in process; see embedder.ts and docs/DISCOVERY.md) and of the task, compared by
 * cosine similarity. Discovery adds the similarity, weighted, to the word ranking's score (catalog.ts).
 *
 * The catalog's vectors are computed by the importer and stored in `api_embeddings` (about 20 s on
 * two threads for the whole catalog, too slow for every start); an index load reads them and embeds
 * in memory the few APIs whose stored vector is missing or stale (an API an operator registered
 * since the last import). A task's vector is computed once per ranking thread and remembered
 * (DISCOVERY_TASK_VECTORS).
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Db } from '#db/sql';
import { loadEmbedder, type Embedder } from './embedder.js';
import type { IndexedEndpoint } from './index-types.js';

/** The model directory the provisioning scripts build (scripts/lib.sh, ensure_embedding_model). */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../../../.venv/models/all-minilm-l6-v2-int8', import.meta.url));

/** DISCOVERY_MODEL_DIR: '' for the provisioned model, 'off' for word ranking only, or a directory. */
export function modelDirSetting(value: string): string | null {
  if (value === 'off') return null;
  return value || DEFAULT_MODEL_DIR;
}

/** What an API's embedding is computed from. */
export interface EmbeddableApi {
  name: string;
  description: string;
  categories: string[];
  endpoints: IndexedEndpoint[];
}

const DESCRIPTION_CHARS = 400;
const ENDPOINT_SUMMARIES = 5;

/**
 * The text embedded for an API: its name, the start of its description, its categories and its
 * first endpoint summaries (the model reads at most 128 tokens). Chosen before any result on the
 * evaluation sets; six variants scored within one or two tasks of it.
 */
export function embeddingText(api: EmbeddableApi): string {
  // An operator's API may list endpoints without a summary.
  const summaries = api.endpoints
    .map((e) => (typeof e.summary === 'string' ? e.summary.trim() : ''))
    .filter(Boolean)
    .slice(0, ENDPOINT_SUMMARIES);
  return [api.name, api.description.slice(0, DESCRIPTION_CHARS), api.categories.map((c) => c.replace(/_/g, ' ')).join(', '), summaries.join('. ')]
    .map((part) => part.trim())
    .filter(Boolean)
    .join('. ');
}

/** Identifies the model and the exact text a stored vector was computed from. */
export function embeddingHash(model: string, text: string): string {
  return createHash('sha256').update(model).update('\n').update(text).digest('hex').slice(0, 32);
}

const toBytes = (vector: Float32Array) => Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);

/** A stored vector as a Float32Array of its own (a Buffer's offset need not be 4-aligned). */
function fromBytes(bytes: Uint8Array): Float32Array {
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

interface EmbeddingSourceRow {
  id: string;
  name: string;
  description: string;
  categories: string[];
  endpoints: IndexedEndpoint[] | null;
  text_hash: string | null;
}

const BATCH = 32;

/**
 * Computes and stores the embedding of every API whose stored one is missing or stale (another
 * model, or its text changed), in batches, with progress lines. Returns how many it computed.
 * `only` limits the check to those APIs (a re-index of one API reads one row, not the catalog).
 */
export async function embedCatalog(db: Db, embedder: Embedder, log: (line: string) => void = () => {}, only?: readonly string[]): Promise<number> {
  const rows = await db<EmbeddingSourceRow[]>`
    select a.id, a.name, left(a.description, 400) as description, a.categories, a.endpoints, v.text_hash
      from apis a left join api_embeddings v on v.api_id = a.id and v.model = ${embedder.model}
     where ${only === undefined} or a.id = any(${only ?? []}::text[])
     order by a.id`;
  const todo = rows
    .map((row) => {
      const text = embeddingText({ ...row, endpoints: row.endpoints ?? [] });
      return { id: row.id, text, hash: embeddingHash(embedder.model, text), stored: row.text_hash };
    })
    .filter((row) => row.hash !== row.stored);
  if (todo.length === 0) return 0;
  log(`embedding ${todo.length} of ${rows.length} ${only === undefined ? '' : 'named '}APIs for discovery (${embedder.model})`);
  const started = Date.now();
  let reported = started;
  for (let at = 0; at < todo.length; at += BATCH) {
    const batch = todo.slice(at, at + BATCH);
    const vectors = await embedder.embed(batch.map((row) => row.text));
    const values = batch.map((row, k) => ({ api_id: row.id, model: embedder.model, text_hash: row.hash, vector: toBytes(vectors[k]!) }));
    await db`
      insert into api_embeddings ${db(values, 'api_id', 'model', 'text_hash', 'vector')}
      on conflict (api_id) do update set model = excluded.model, text_hash = excluded.text_hash, vector = excluded.vector, updated_at = now()`;
    if (Date.now() - reported >= 5_000) {
      reported = Date.now();
      log(`embedded ${Math.min(at + BATCH, todo.length)}/${todo.length}`);
    }
  }
  log(`embedded ${todo.length} APIs in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return todo.length;
}

/** The catalog's vectors as the in-process index holds them: row `at` of the matrix is API `at`. */
export class DenseVectors {
  constructor(
    private readonly embedder: Embedder,
    /** apis × dimensions, unit rows; a row of zeros for an API without a vector. */
    private readonly matrix: Float32Array,
  ) {}

  get model(): string {
    return this.embedder.model;
  }

  /** The similarity of a unit query vector to every API (index order). */
  similarities(query: Float32Array): Promise<Float32Array> {
    return this.embedder.similarities(query, this.matrix);
  }
}

/** The `k` highest of `scores` that are at least `min`, best first, with their positions. */
export function nearestOf(scores: Float32Array, k: number, min: number): { at: number; similarity: number }[] {
  const best: { at: number; similarity: number }[] = [];
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i]!;
    if (s < min || (best.length === k && s <= best[k - 1]!.similarity)) continue;
    let place = best.length;
    while (place > 0 && s > best[place - 1]!.similarity) place--;
    best.splice(place, 0, { at: i, similarity: s });
    if (best.length > k) best.pop();
  }
  return best;
}

/** At most this many APIs are embedded at an index load; more means the importer has not run. */
const EMBED_AT_LOAD_MAX = 200;

/**
 * Reads the stored vectors of `apis` (in index order) for the embedder's model, embedding in memory
 * the few whose vector is missing or stale. Null when none is stored: discovery ranks by words.
 */
export async function loadDenseVectors(
  db: Db,
  apis: readonly (EmbeddableApi & { id: string })[],
  embedder: Embedder,
  warn: (message: string) => void,
): Promise<DenseVectors | null> {
  const stored = new Map(
    (
      await db<{ api_id: string; text_hash: string; vector: Uint8Array }[]>`
      select api_id, text_hash, vector from api_embeddings where model = ${embedder.model}`
    ).map((r) => [r.api_id, r]),
  );
  if (stored.size === 0) {
    warn(`discovery: no API embeddings for ${embedder.model} are stored; ranking by words only until \`npm run directory:import\` computes them`);
    return null;
  }
  const d = embedder.dimensions;
  const matrix = new Float32Array(apis.length * d);
  const missing: { at: number; text: string }[] = [];
  apis.forEach((api, at) => {
    const text = embeddingText(api);
    const row = stored.get(api.id);
    if (row && row.text_hash === embeddingHash(embedder.model, text) && row.vector.byteLength === d * 4) matrix.set(fromBytes(row.vector), at * d);
    else missing.push({ at, text });
  });
  if (missing.length > EMBED_AT_LOAD_MAX) {
    warn(`discovery: ${missing.length} APIs have no current embedding; they rank by words only until \`npm run directory:import\` computes them`);
  } else if (missing.length > 0) {
    const vectors = await embedder.embed(missing.map((m) => m.text));
    missing.forEach((m, k) => matrix.set(vectors[k]!, m.at * d));
  }
  return new DenseVectors(embedder, matrix);
}

/**
 * A process's embedder and its memory of task vectors. The model loads on first use (a fraction of
 * a second); a model that cannot load is reported once and discovery ranks by words.
 */
export class QueryEmbeddings {
  private embedder: Promise<Embedder | null> | null = null;
  private readonly memo = new Map<string, Float32Array>();

  /** `remember`: how many task vectors are kept (0: every discovery embeds its task). */
  constructor(
    private readonly modelDir: string,
    private readonly warn: (message: string, error?: unknown) => void,
    private readonly remember = 5_000,
  ) {}

  model(): Promise<Embedder | null> {
    this.embedder ??= loadEmbedder(this.modelDir).catch((error: unknown) => {
      this.warn('discovery: the embedding model could not be loaded; ranking by words only', error);
      return null;
    });
    return this.embedder;
  }

  /**
   * The similarity of a task to every API (DenseVectors.similarities), or null when the model cannot
   * answer: discovery then ranks by words, and the failure is logged (at most once a minute).
   */
  async similarities(vectors: DenseVectors, text: string): Promise<Float32Array | null> {
    return (await this.match(vectors, text))?.similarities ?? null;
  }

  /** The task's unit vector with its similarity to every API (one embedding), or null as above. */
  async match(vectors: DenseVectors, text: string): Promise<{ vector: Float32Array; similarities: Float32Array } | null> {
    try {
      const vector = await this.vector(text);
      return vector ? { vector, similarities: await vectors.similarities(vector) } : null;
    } catch (error) {
      if (Date.now() - this.warnedAt >= 60_000) {
        this.warnedAt = Date.now();
        this.warn('discovery: the embedding model failed; ranking by words only', error);
      }
      return null;
    }
  }

  private warnedAt = 0;

  /** The unit vector of a task's text, from memory when it was asked before. */
  async vector(text: string): Promise<Float32Array | null> {
    const known = this.memo.get(text);
    if (known) return known;
    const embedder = await this.model();
    if (!embedder) return null;
    const [vector] = await embedder.embed([text]);
    if (this.remember === 0) return vector!;
    if (this.memo.size >= this.remember) this.memo.delete(this.memo.keys().next().value!);
    this.memo.set(text, vector!);
    return vector!;
  }

  async close(): Promise<void> {
    const embedder = await this.embedder;
    await embedder?.close();
  }
}
