/**
 * Operations as retrieval units (issue 35): every stored endpoint of every API is a small document
 * of its own (summary, and the words of its path, camelCase split: `/freeBusy` is "free busy"),
 * ranked by BM25 over the operations, not the APIs. A capability that lives in one operation of a
 * large API (a calendar's free/busy look-up, an AI platform's image generation) is then found by
 * the operation that states it, and discovery names that operation with its price.
 *
 * A query's concept groups (catalog.ts planQuery) are scored per operation: each group counts once,
 * with the best of its terms, as term factor x IDF over the operations x BM25's length factor (a
 * word said once: term frequency 1). An API's operation score is its best operation's share of the
 * query's whole weight (0..about 1.5): "how much of the task one operation of this API names".
 *
 * Cost: built once per index load from the endpoints already in memory (about 80,000 for the full
 * catalog); a posting list per stem of operation ids (Int32Array) and one length per operation.
 */
import { stem } from 'porter2';
import { ENGLISH_STOPWORDS } from './scoring.js';
import type { IndexedApi } from './index-types.js';

/** BM25's parameters (the usual ones). */
const K1 = 1.2;
const B = 0.75;

/** One query term: its concept group, stem (null: a stop word) and weight factor (1, or less for a related word). */
export interface OperationTerm {
  group: number;
  lexeme: string | null;
  factor: number;
}

export interface OperationHit {
  /** The API's position in the index. */
  api: number;
  /** The best operation's share of the query's weight. */
  score: number;
  /** Its best operations (positions in the API's endpoints), best first, at most `perApi`. */
  operations: number[];
}

/** The words of an operation: its summary's and its path's, camelCase and snake_case split, lower-cased. */
export function operationWords(summary: string, path: string): string[] {
  const text = `${summary} ${path.replace(/\{[^}]*\}/g, ' ')}`
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase();
  return text.split(/[^a-z0-9]+/).filter((w) => w.length > 1 && !ENGLISH_STOPWORDS.has(w));
}

const stemMemo = new Map<string, string>();
/** Porter2, the algorithm of Postgres' english configuration (the catalog's lexemes), for letters only. */
function stemOf(word: string): string {
  let s = stemMemo.get(word);
  if (s === undefined) {
    s = /^[a-z]+$/.test(word) ? stem(word) : word;
    if (stemMemo.size < 200_000) stemMemo.set(word, s);
  }
  return s;
}

export class OperationIndex {
  /** Per operation (global id), its API's position and its position in the API's endpoints. */
  private readonly opApi: Int32Array;
  private readonly opAt: Int32Array;
  /** Per operation, BM25's length factor for a term said once: (k1 + 1) / (1 + k1 (1 - b + b len / avg)). */
  private readonly lengthFactor: Float32Array;
  private readonly postings = new Map<string, Int32Array>();
  readonly size: number;
  private groupBest: Float32Array;
  private total: Float32Array;

  constructor(apis: readonly IndexedApi[]) {
    let count = 0;
    for (const api of apis) count += api.endpoints.length;
    this.size = count;
    this.opApi = new Int32Array(count);
    this.opAt = new Int32Array(count);
    const lengths = new Int32Array(count);
    const lists = new Map<string, number[]>();
    let id = 0;
    let totalLength = 0;
    apis.forEach((api, a) => {
      api.endpoints.forEach((endpoint, at) => {
        this.opApi[id] = a;
        this.opAt[id] = at;
        const stems = new Set(operationWords(endpoint.summary ?? '', endpoint.path).map(stemOf));
        lengths[id] = stems.size;
        totalLength += stems.size;
        for (const s of stems) {
          let list = lists.get(s);
          if (!list) lists.set(s, (list = []));
          list.push(id);
        }
        id++;
      });
    });
    for (const [s, list] of lists) this.postings.set(s, Int32Array.from(list));
    const avg = count ? totalLength / count : 1;
    this.lengthFactor = Float32Array.from(lengths, (len) => (K1 + 1) / (1 + K1 * (1 - B + (B * len) / avg)));
    this.groupBest = new Float32Array(count);
    this.total = new Float32Array(count);
  }

  /** IDF of a stem over the operations (BM25's, floored at 0). */
  idf(lexeme: string): number {
    const df = this.postings.get(lexeme)?.length ?? 0;
    return Math.max(0, Math.log((this.size - df + 0.5) / (df + 0.5) + 1));
  }

  /**
   * Every API whose operations name some of the query's concept groups, by its best operation's
   * share of the query's weight, best first, each with its best `perApi` operations. `only` limits
   * the APIs (by position) when given.
   */
  rank(terms: readonly OperationTerm[], only?: (api: number) => boolean, perApi = 3): OperationHit[] {
    // Per group, its terms with their weight (factor x IDF); the query's weight is the sum of each group's best.
    const groups = new Map<number, { lexeme: string; weight: number }[]>();
    for (const t of terms) {
      if (t.lexeme === null) continue;
      const weight = t.factor * this.idf(t.lexeme);
      if (weight <= 0) continue;
      let g = groups.get(t.group);
      if (!g) groups.set(t.group, (g = []));
      if (!g.some((x) => x.lexeme === t.lexeme)) g.push({ lexeme: t.lexeme, weight });
    }
    let queryWeight = 0;
    for (const g of groups.values()) queryWeight += Math.max(...g.map((x) => x.weight));
    if (queryWeight === 0) return [];
    const { groupBest, total, lengthFactor } = this;
    const touched: number[] = [];
    for (const g of groups.values()) {
      const inGroup: number[] = [];
      for (const { lexeme, weight } of g) {
        const list = this.postings.get(lexeme);
        if (!list) continue;
        for (let k = 0; k < list.length; k++) {
          const op = list[k]!;
          const w = weight * lengthFactor[op]!;
          if (groupBest[op] === 0) inGroup.push(op);
          if (w > groupBest[op]!) groupBest[op] = w;
        }
      }
      for (const op of inGroup) {
        if (total[op] === 0) touched.push(op);
        total[op] = total[op]! + groupBest[op]!;
        groupBest[op] = 0;
      }
    }
    // Per API, its best operations.
    const byApi = new Map<number, number[]>();
    for (const op of touched) {
      const api = this.opApi[op]!;
      if (only && !only(api)) continue;
      let ops = byApi.get(api);
      if (!ops) byApi.set(api, (ops = []));
      ops.push(op);
    }
    const hits: OperationHit[] = [];
    for (const [api, ops] of byApi) {
      ops.sort((x, y) => total[y]! - total[x]! || x - y);
      hits.push({ api, score: total[ops[0]!]! / queryWeight, operations: ops.slice(0, perApi).map((op) => this.opAt[op]!) });
    }
    for (const op of touched) total[op] = 0;
    hits.sort((x, y) => y.score - x.score || x.api - y.api);
    return hits;
  }
}
