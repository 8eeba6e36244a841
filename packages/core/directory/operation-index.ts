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
 * catalog): each operation's stems as ids in one Int32Array (about half a million) and one length
 * factor per operation. A discovery scores only the operations of the APIs it answers with.
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
  /** Per API (position), its first operation's id; operations of API a are firstOp[a]..firstOp[a + 1]. */
  private readonly firstOp: Int32Array;
  /** Per operation, its stems' ids (unique, sorted) as a range of `stems`. */
  private readonly stemStart: Int32Array;
  private readonly stems: Int32Array;
  private readonly stemIds = new Map<string, number>();
  /** Per stem id, the number of operations using it. */
  private readonly df: Int32Array;
  /** Per operation, BM25's length factor for a term said once: (k1 + 1) / (1 + k1 (1 - b + b len / avg)). */
  private readonly lengthFactor: Float32Array;
  readonly size: number;

  constructor(apis: readonly IndexedApi[]) {
    let count = 0;
    for (const api of apis) count += api.endpoints.length;
    this.size = count;
    this.firstOp = new Int32Array(apis.length + 1);
    this.stemStart = new Int32Array(count + 1);
    const flat: number[] = [];
    const df: number[] = [];
    let id = 0;
    apis.forEach((api, a) => {
      this.firstOp[a] = id;
      for (const endpoint of api.endpoints) {
        this.stemStart[id] = flat.length;
        const ids = new Set<number>();
        for (const word of operationWords(endpoint.summary ?? '', endpoint.path)) {
          const s = stemOf(word);
          let sid = this.stemIds.get(s);
          if (sid === undefined) {
            sid = df.length;
            this.stemIds.set(s, sid);
            df.push(0);
          }
          ids.add(sid);
        }
        for (const sid of [...ids].sort((x, y) => x - y)) {
          flat.push(sid);
          df[sid]! += 1;
        }
        id++;
      }
    });
    this.firstOp[apis.length] = id;
    this.stemStart[count] = flat.length;
    this.stems = Int32Array.from(flat);
    this.df = Int32Array.from(df);
    const avg = count ? flat.length / count : 1;
    this.lengthFactor = new Float32Array(count);
    for (let op = 0; op < count; op++) {
      const len = this.stemStart[op + 1]! - this.stemStart[op]!;
      this.lengthFactor[op] = (K1 + 1) / (1 + K1 * (1 - B + (B * len) / avg));
    }
  }

  /** IDF of a stem over the operations (BM25's, floored at 0). */
  private idf(sid: number): number {
    const df = this.df[sid]!;
    return Math.max(0, Math.log((this.size - df + 0.5) / (df + 0.5) + 1));
  }

  /** The query's concept groups as stem ids with their weights (factor x IDF), and the query's whole weight. */
  query(terms: readonly OperationTerm[]): OperationQuery {
    const byGroup = new Map<number, { sid: number; weight: number }[]>();
    for (const t of terms) {
      if (t.lexeme === null) continue;
      const sid = this.stemIds.get(t.lexeme);
      // A term no operation uses still counts in the query's weight (as the rarest term would).
      const weight = t.factor * (sid === undefined ? Math.log(this.size + 1) : this.idf(sid));
      if (weight <= 0) continue;
      let g = byGroup.get(t.group);
      if (!g) byGroup.set(t.group, (g = []));
      g.push({ sid: sid ?? -1, weight });
    }
    const groups = [...byGroup.values()];
    let total = 0;
    for (const g of groups) total += Math.max(...g.map((x) => x.weight));
    return { groups, total };
  }

  /** An operation's score for a query: per group its best term's weight x the length factor. */
  private score(op: number, query: OperationQuery): number {
    const from = this.stemStart[op]!;
    const to = this.stemStart[op + 1]!;
    let sum = 0;
    for (const g of query.groups) {
      let best = 0;
      for (const { sid, weight } of g) {
        if (sid < 0 || weight <= best) continue;
        for (let k = from; k < to; k++) {
          if (this.stems[k] === sid) {
            best = weight;
            break;
          }
        }
      }
      sum += best;
    }
    return sum * this.lengthFactor[op]!;
  }

  /**
   * An API's best operations for a query (positions in its endpoints, best first, at most
   * `perApi`, only those naming some of it) and the best one's share of the query's weight.
   */
  best(api: number, query: OperationQuery, perApi = 3): OperationHit {
    const scored: { at: number; score: number }[] = [];
    if (query.total > 0) {
      const first = this.firstOp[api]!;
      for (let op = first; op < this.firstOp[api + 1]!; op++) {
        const score = this.score(op, query);
        if (score > 0) scored.push({ at: op - first, score });
      }
    }
    scored.sort((x, y) => y.score - x.score || x.at - y.at);
    return { api, score: scored.length ? scored[0]!.score / query.total : 0, operations: scored.slice(0, perApi).map((s) => s.at) };
  }

  /** How many of an API's (position) operations hold at least one of these stems. */
  countNamingAny(api: number, lexemes: readonly string[]): number {
    const sids = new Set(lexemes.flatMap((l) => this.stemIds.get(l) ?? []));
    if (sids.size === 0) return 0;
    let n = 0;
    for (let op = this.firstOp[api]!; op < this.firstOp[api + 1]!; op++) {
      for (let k = this.stemStart[op]!; k < this.stemStart[op + 1]!; k++) {
        if (sids.has(this.stems[k]!)) {
          n++;
          break;
        }
      }
    }
    return n;
  }

  /** The APIs (positions) with an operation whose words hold every one of these stems, in index order. */
  naming(lexemes: readonly string[]): number[] {
    const sids = lexemes.map((l) => this.stemIds.get(l));
    if (sids.length === 0 || sids.some((sid) => sid === undefined)) return [];
    const out: number[] = [];
    for (let api = 0; api + 1 < this.firstOp.length; api++) {
      for (let op = this.firstOp[api]!; op < this.firstOp[api + 1]!; op++) {
        const from = this.stemStart[op]!;
        const to = this.stemStart[op + 1]!;
        let all = true;
        for (const sid of sids) {
          let has = false;
          for (let k = from; k < to && !has; k++) has = this.stems[k] === sid;
          if (!has) {
            all = false;
            break;
          }
        }
        if (all) {
          out.push(api);
          break;
        }
      }
    }
    return out;
  }
}

export interface OperationQuery {
  groups: { sid: number; weight: number }[][];
  total: number;
}
