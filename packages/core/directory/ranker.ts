/**
 * The directory's in-process search index: the whole catalog's ranking data (about 2,600 APIs, a
 * few megabytes) held in memory by each edge instance, so a search or discovery ranks without a
 * database round trip.
 *
 * The index is loaded from what Postgres already computes at write time: the weighted
 * `search_vector` and the `endpoint_vector` of every API (kept by the trigger of migration 00005),
 * the English lexeme of every catalog word (`to_tsvector('english', word)` over `directory_words`)
 * and the vote tallies. Ranking then reproduces, in memory, the features the SQL ranking computed
 * per request: `ts_rank` (normalization 0 over the weighted vector, 1 over the endpoint vector),
 * IDF-weighted concept coverage, pg_trgm `word_similarity` of the query to the name, and trigram
 * `similarity` for spelling correction. Words the catalog never uses are stemmed with Porter2, the
 * algorithm of Postgres' `english` configuration.
 *
 * Freshness: every write to `apis` or `votes` notifies the `directory_changed` channel (statement
 * triggers of migration 00007, delivered at commit); the holder reloads the catalog (debounced) or
 * just the vote tallies, and keeps answering from the previous index meanwhile.
 */
import { stem } from 'porter2';
import { CAPABILITY_SYNONYMS } from './vocabulary.js';
import type { Db, Sql } from '#db/sql';

/** Postgres' english.stop: to_tsquery('english', ...) drops these. */
const ENGLISH_STOPWORDS = new Set(
  (
    'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its itself ' +
    'they them their theirs themselves what which who whom this that these those am is are was were be been being have has had having ' +
    'do does did doing a an the and but if or because as until while of at by for with about against between into through during before ' +
    'after above below to from up down in out on off over under again further then once here there when where why how all any both each ' +
    'few more most other some such no nor not only own same so than too very s t can will just don should now'
  ).split(' '),
);

/** ts_rank's default weights, indexed by position weight D=0, C=1, B=2, A=3. */
const RANK_WEIGHTS = [0.1, 0.2, 0.4, 1.0];
const F = Math.fround;

export interface IndexedEndpoint {
  method: string;
  path: string;
  summary: string;
}

export interface IndexedApi {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  categories: string[];
  /** At most 300 characters, as summaries show it. */
  description: string;
  price_micros: bigint;
  featured: boolean;
  popularity: number;
  votes_up: number;
  votes_down: number;
  endpoints: IndexedEndpoint[];
  /** Trigrams of the lower-cased name/provider/service, in order (pg_trgm word_similarity). */
  nameTrigrams: string[];
  /** Lower-cased words of each endpoint's summary and path, built on first use (discovery reasons). */
  endpointWords?: { words: string[]; endpoints: number[][] };
  /** Number of lexemes of the (position-stripped) endpoint vector: ts_rank's length normalization. */
  endpointLexemes: number;
}

interface HeadPostings {
  apis: number[];
  /** Each API's ts_rank contribution for this lexeme (depends only on the document). */
  contributions: number[];
}

interface VocabularyWord {
  word: string;
  ndoc: number;
  /** The english lexeme, null for a stop word. */
  lexeme: string | null;
  trigrams: number;
}

/** Trigrams of a text as pg_trgm makes them: per word, padded "  word ", in order, duplicates kept. */
export function trigrams(text: string): string[] {
  const out: string[] = [];
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (!word) continue;
    const chars = Array.from(`  ${word} `);
    for (let i = 0; i + 2 < chars.length; i++) out.push(chars[i]! + chars[i + 1]! + chars[i + 2]!);
  }
  return out;
}

/** pg_trgm similarity(): shared unique trigrams over the union, in float4 like Postgres. */
export function similarity(a: string, b: string): number {
  const ta = new Set(trigrams(a));
  const tb = new Set(trigrams(b));
  let shared = 0;
  for (const t of ta) if (tb.has(t)) shared++;
  const union = ta.size + tb.size - shared;
  return union === 0 ? 0 : F(shared / union);
}

/**
 * pg_trgm word_similarity(query, text): the greatest similarity between the query's trigram set and
 * a contiguous extent of the text's ordered trigrams, found by the same iterative procedure as
 * pg_trgm (extents end at a trigram of the query; the lower bound moves while that helps).
 * Trigrams are ids of one dictionary; `found[id]` marks the query's, `querySize` counts its unique
 * trigrams; `lastPos` is scratch space of the dictionary's size, all -1, left all -1.
 */
export function wordSimilarity(found: Uint8Array, querySize: number, text: Int32Array, lastPos: Int32Array): number {
  let lower = -1;
  let count = 0;
  let textSize = 0;
  let best = 0;
  for (let i = 0; i < text.length; i++) {
    const id = text[i]!;
    if (lower >= 0 || found[id]) {
      if (lastPos[id]! < 0) {
        textSize++;
        if (found[id]) count++;
      }
      lastPos[id] = i;
    }
    if (!found[id]) continue;
    if (lower === -1) {
      lower = i;
      textSize = 1;
    }
    let current = F(count / (querySize + textSize - count));
    let tmpCount = count;
    let tmpSize = textSize;
    const previousLower = lower;
    for (let tmpLower = lower; tmpLower <= i; tmpLower++) {
      const candidate = F(tmpCount / (querySize + tmpSize - tmpCount));
      if (candidate > current) {
        current = candidate;
        textSize = tmpSize;
        lower = tmpLower;
        count = tmpCount;
      }
      const tid = text[tmpLower]!;
      if (lastPos[tid] === tmpLower) {
        tmpSize--;
        if (found[tid]) tmpCount--;
      }
    }
    best = Math.max(best, current);
    for (let tmpLower = previousLower; tmpLower < lower; tmpLower++) {
      const tid = text[tmpLower]!;
      if (lastPos[tid] === tmpLower) lastPos[tid] = -1;
    }
  }
  for (let i = 0; i < text.length; i++) lastPos[text[i]!] = -1;
  return best;
}

/** word_similarity(query, text) of two strings (see wordSimilarity). */
export function wordSimilarityOf(query: string, text: string): number {
  const ids = new Map<string, number>();
  const id = (t: string) => {
    let at = ids.get(t);
    if (at === undefined) ids.set(t, (at = ids.size));
    return at;
  };
  const queryIds = new Set(trigrams(query).map(id));
  const sequence = Int32Array.from(trigrams(text).map(id));
  const found = new Uint8Array(ids.size);
  for (const at of queryIds) found[at] = 1;
  return wordSimilarity(found, queryIds.size, sequence, new Int32Array(ids.size).fill(-1));
}

/** ts_rank's per-lexeme contribution (calc_rank_or) from the weights of its positions, in order. */
function rankContribution(weights: number[]): number {
  let sum = 0;
  let maxWeight = -1;
  let maxAt = 0;
  for (let j = 0; j < weights.length; j++) {
    const w = weights[j]!;
    sum = F(sum + F(w / ((j + 1) * (j + 1))));
    if (w > maxWeight) {
      maxWeight = w;
      maxAt = j;
    }
  }
  return F(F(maxWeight + sum - F(maxWeight / ((maxAt + 1) * (maxAt + 1)))) / 1.64493406685);
}

/** Parses tsvector text output: 'lexeme':1A,5,12B 'other' ... -> lexeme -> position weights in order. */
function parseTsvector(text: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const entry = /'((?:[^']|'')*)'(?::([0-9A-D,]+))?/g;
  for (let m = entry.exec(text); m; m = entry.exec(text)) {
    const lexeme = m[1]!.replace(/''/g, "'").replace(/\\\\/g, '\\');
    const weights = m[2]
      ? m[2].split(',').map((p) => {
          const letter = p.charAt(p.length - 1);
          return letter === 'A' ? RANK_WEIGHTS[3]! : letter === 'B' ? RANK_WEIGHTS[2]! : letter === 'C' ? RANK_WEIGHTS[1]! : RANK_WEIGHTS[0]!;
        })
      : [RANK_WEIGHTS[0]!];
    out.set(lexeme, weights);
  }
  return out;
}

export interface IndexTerm {
  group: number;
  lexeme: string | null;
  weight: number;
}

export interface RankRequest {
  /** Unique lexemes of every query term (ts_rank's query). */
  lexemes: string[];
  /** Lexemes that pick candidates. */
  selective: string[];
  /** Every term of every concept group with its IDF weight. */
  terms: IndexTerm[];
  /** Normalized query text compared to names. */
  raw: string;
  category?: string | undefined;
}

export interface IndexHit {
  api: IndexedApi;
  score: number;
  coverage: number;
}

const UNCATEGORIZED = 'uncategorized';

export class DirectoryIndex {
  readonly apis: IndexedApi[];
  readonly loadedAt = Date.now();
  private readonly byId = new Map<string, number>();
  private readonly head = new Map<string, HeadPostings>();
  private readonly endpoint = new Map<string, number[]>();
  /** Name trigrams as ids: per API its sequence, per trigram the APIs using it. */
  private readonly nameTrigramIds = new Map<string, number>();
  private readonly nameTrigramSequences: Int32Array[] = [];
  private readonly nameTrigramPostings: number[][] = [];
  private nameTrigramScratch: { found: Uint8Array; lastPos: Int32Array } | null = null;
  private readonly vocabulary = new Map<string, VocabularyWord>();
  private readonly vocabularyList: VocabularyWord[] = [];
  private readonly vocabularyTrigrams = new Map<string, number[]>();
  /** Lexemes of the vocabulary's terms that are not catalog words. */
  private readonly extraLexemes = new Map<string, string | null>();
  private scratch: { candidate: Uint8Array; shared: Int32Array } | null = null;
  private marks: { head: Float32Array; endpoint: Uint8Array } | null = null;
  private vocabularyShared: Int32Array | null = null;
  private readonly corrections = new Map<string, { word: string; ndoc: number } | null>();

  constructor(
    apis: IndexedApi[],
    vectors: { head: Map<string, number[]>; endpoint: string[] }[],
    words: { word: string; ndoc: number; lexeme: string | null }[],
  ) {
    this.apis = apis;
    apis.forEach((api, i) => {
      this.byId.set(api.id, i);
      const { head, endpoint } = vectors[i]!;
      for (const [lexeme, weights] of head) {
        let postings = this.head.get(lexeme);
        if (!postings) this.head.set(lexeme, (postings = { apis: [], contributions: [] }));
        postings.apis.push(i);
        postings.contributions.push(rankContribution(weights));
      }
      for (const lexeme of endpoint) {
        let postings = this.endpoint.get(lexeme);
        if (!postings) this.endpoint.set(lexeme, (postings = []));
        postings.push(i);
      }
      const sequence = new Int32Array(api.nameTrigrams.length);
      api.nameTrigrams.forEach((t, k) => {
        let id = this.nameTrigramIds.get(t);
        if (id === undefined) {
          id = this.nameTrigramIds.size;
          this.nameTrigramIds.set(t, id);
          this.nameTrigramPostings.push([]);
        }
        sequence[k] = id;
        const postings = this.nameTrigramPostings[id]!;
        if (postings[postings.length - 1] !== i) postings.push(i);
      });
      this.nameTrigramSequences.push(sequence);
    });
    for (const w of words) {
      const grams = new Set(trigrams(w.word));
      const entry: VocabularyWord = { ...w, trigrams: grams.size };
      const at = this.vocabularyList.length;
      this.vocabularyList.push(entry);
      this.vocabulary.set(w.word, entry);
      for (const t of grams) {
        let postings = this.vocabularyTrigrams.get(t);
        if (!postings) this.vocabularyTrigrams.set(t, (postings = []));
        postings.push(at);
      }
    }
  }

  api(id: string): IndexedApi | undefined {
    const at = this.byId.get(id);
    return at === undefined ? undefined : this.apis[at];
  }

  /**
   * The three endpoints of an API whose summary and path have the most words starting with one of
   * `stems` (a word-prefix match, like Postgres' \m(stem|...) counted with regexp_count), first in
   * the description on a tie.
   */
  matchingEndpoints(api: IndexedApi, stems: readonly string[]): IndexedEndpoint[] {
    if (stems.length === 0) return [];
    const index = (api.endpointWords ??= endpointWords(api.endpoints));
    // The words are sorted: the words starting with a stem are one range, found by binary search.
    const matched = new Set<number>();
    for (const stem of stems) {
      let lo = 0;
      let hi = index.words.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (index.words[mid]! < stem) lo = mid + 1;
        else hi = mid;
      }
      for (let k = lo; k < index.words.length && index.words[k]!.startsWith(stem); k++) matched.add(k);
    }
    const hits = new Map<number, number>();
    for (const k of matched) for (const at of index.endpoints[k]!) hits.set(at, (hits.get(at) ?? 0) + 1);
    return [...hits]
      .sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, 3)
      .map(([at]) => api.endpoints[at]!);
  }

  get size(): number {
    return this.apis.length;
  }

  /** Number of APIs using a catalog word (directory_words.ndoc), undefined for a word the catalog never uses. */
  documentFrequency(word: string): number | undefined {
    return this.vocabulary.get(word)?.ndoc;
  }

  addLexeme(word: string, lexeme: string | null): void {
    this.extraLexemes.set(word, lexeme);
  }

  /** The english lexeme of a term as to_tsquery('english', term) makes it; null for a stop word. */
  lexeme(term: string): string | null {
    const known = this.vocabulary.get(term);
    if (known) return known.lexeme;
    const extra = this.extraLexemes.get(term);
    if (extra !== undefined) return extra;
    if (ENGLISH_STOPWORDS.has(term)) return null;
    // Letters only are stemmed (asciiword); words with digits stay as they are (numword, int).
    return /^[a-z]+$/.test(term) ? stem(term) : term;
  }

  /**
   * The catalog word closest to `word` by trigram similarity (at least 0.45), the most used one on a
   * tie: the spelling correction of a word the catalog never uses.
   */
  closestWord(word: string): { word: string; ndoc: number } | null {
    const memo = this.corrections.get(word);
    if (memo !== undefined) return memo;
    const grams = new Set(trigrams(word));
    const shared = (this.vocabularyShared ??= new Int32Array(this.vocabularyList.length));
    const touched: number[] = [];
    for (const t of grams) {
      for (const at of this.vocabularyTrigrams.get(t) ?? []) {
        if (shared[at] === 0) touched.push(at);
        shared[at] = shared[at]! + 1;
      }
    }
    let best: VocabularyWord | null = null;
    let bestSimilarity = 0;
    for (const at of touched) {
      const count = shared[at]!;
      shared[at] = 0;
      const candidate = this.vocabularyList[at]!;
      const sim = F(count / (grams.size + candidate.trigrams - count));
      if (sim < 0.45) continue;
      if (
        !best ||
        sim > bestSimilarity ||
        (sim === bestSimilarity && (candidate.ndoc > best.ndoc || (candidate.ndoc === best.ndoc && candidate.word < best.word)))
      ) {
        best = candidate;
        bestSimilarity = sim;
      }
    }
    const result = best ? { word: best.word, ndoc: best.ndoc } : null;
    // Corrections depend on the index only; remember a bounded number of them.
    if (this.corrections.size >= 10_000) this.corrections.clear();
    this.corrections.set(word, result);
    return result;
  }

  /** Replaces the vote tallies (after a vote changed). */
  setVotes(tallies: Map<string, { up: number; down: number }>): void {
    for (const api of this.apis) {
      const t = tallies.get(api.id);
      api.votes_up = t?.up ?? 0;
      api.votes_down = t?.down ?? 0;
    }
  }

  /**
   * Ranks the catalog for a query. Score = ts_rank over the weighted vector (capped at 1)
   * + 0.6 x min(20 x length-normalized endpoint rank, 1) + 1.5 x coverage + 0.5 x head coverage
   * + 0.8 x name word-similarity (when >= 0.6) + 0.15 x popularity + 0.05 if featured
   * + 0.005 x net votes (at most 10); best first, then by id.
   */
  rank(request: RankRequest, limit = Number.POSITIVE_INFINITY): IndexHit[] {
    const n = this.apis.length;
    // Scratch buffers live with the index and are reset through the touched lists: ranking is
    // synchronous, so one query uses them at a time.
    const scratch = (this.scratch ??= { candidate: new Uint8Array(n), shared: new Int32Array(n) });
    const { candidate, shared } = scratch;
    const candidates: number[] = [];
    const touch = (i: number) => {
      if (candidate[i] === 0) {
        candidate[i] = 1;
        candidates.push(i);
      }
    };
    // Candidates: the APIs a selective term matches (posting lists of rare words are short)...
    for (const lexeme of request.selective) {
      const head = this.head.get(lexeme);
      if (head) for (let k = 0; k < head.apis.length; k++) touch(head.apis[k]!);
      const endpoint = this.endpoint.get(lexeme);
      if (endpoint) for (let k = 0; k < endpoint.length; k++) touch(endpoint[k]!);
    }
    // ...and the APIs whose name resembles the query (typos in names): only those sharing enough
    // trigrams with it can reach a word similarity of 0.6.
    const queryTrigrams = new Set(trigrams(request.raw));
    const nameSimilarity = new Map<number, number>();
    if (queryTrigrams.size > 0) {
      const size = this.nameTrigramIds.size;
      const names = (this.nameTrigramScratch ??= { found: new Uint8Array(size), lastPos: new Int32Array(size).fill(-1) });
      const queryIds: number[] = [];
      for (const t of queryTrigrams) {
        const id = this.nameTrigramIds.get(t);
        if (id !== undefined) queryIds.push(id);
      }
      const sharedTouched: number[] = [];
      for (const id of queryIds) {
        names.found[id] = 1;
        const postings = this.nameTrigramPostings[id]!;
        for (let k = 0; k < postings.length; k++) {
          const i = postings[k]!;
          if (shared[i] === 0) sharedTouched.push(i);
          shared[i] = shared[i]! + 1;
        }
      }
      const needed = 0.6 * queryTrigrams.size;
      for (const i of sharedTouched) {
        if (shared[i]! >= needed) {
          const sim = wordSimilarity(names.found, queryTrigrams.size, this.nameTrigramSequences[i]!, names.lastPos);
          nameSimilarity.set(i, sim);
          if (sim >= 0.6) touch(i);
        }
        shared[i] = 0;
      }
      for (const id of queryIds) names.found[id] = 0;
    }
    for (const i of candidates) candidate[i] = 0;

    // Every query lexeme's postings, and the concept groups as lexeme indexes: each group counts
    // with the IDF weight of its best matched term.
    const lexemes = request.lexemes;
    const L = lexemes.length;
    const headPostings = lexemes.map((l) => this.head.get(l));
    const endpointPostings = lexemes.map((l) => this.endpoint.get(l));
    const lexemeAt = new Map(lexemes.map((l, k) => [l, k]));
    const groups: { best: number; terms: { at: number; weight: number }[] }[] = [];
    const byGroup = new Map<number, (typeof groups)[number]>();
    for (const term of request.terms) {
      if (term.lexeme === null) continue;
      let group = byGroup.get(term.group);
      if (!group) {
        group = { best: 0, terms: [] };
        byGroup.set(term.group, group);
        groups.push(group);
      }
      group.best = Math.max(group.best, term.weight);
      const at = lexemeAt.get(term.lexeme);
      // A term outside the ts_rank query never matches (it cannot happen: every term is in it).
      group.terms.push({ at: at ?? -1, weight: term.weight });
    }
    let total = 0;
    for (const g of groups) total += g.best;
    total = Math.max(total, 0.001);
    // Dense per-query marks, lexeme-major: headMark[k * n + i] is lexeme k's ts_rank contribution in
    // API i (0 when absent; contributions are positive), endpointMark[k * n + i] 1 when its
    // endpoints use it. Walking the posting lists once beats a look-up per candidate and lexeme.
    if (!this.marks || this.marks.head.length < L * n) this.marks = { head: new Float32Array(L * n), endpoint: new Uint8Array(L * n) };
    const { head: headMark, endpoint: endpointMark } = this.marks;
    for (let k = 0; k < L; k++) {
      const head = headPostings[k];
      if (head) for (let j = 0; j < head.apis.length; j++) headMark[k * n + head.apis[j]!] = head.contributions[j]!;
      const endpoint = endpointPostings[k];
      if (endpoint) for (let j = 0; j < endpoint.length; j++) endpointMark[k * n + endpoint[j]!] = 1;
    }
    const inHead = new Uint8Array(L);
    const inEndpoints = new Uint8Array(L);
    const category = request.category;
    const top = new TopHits(limit);
    for (const i of candidates) {
      const api = this.apis[i]!;
      if (category !== undefined && !(category === UNCATEGORIZED ? api.categories.length === 0 : api.categories.includes(category))) continue;
      let headSum = 0;
      let endpointMatches = 0;
      for (let k = 0; k < L; k++) {
        const contribution = headMark[k * n + i]!;
        inHead[k] = contribution > 0 ? 1 : 0;
        if (contribution > 0) headSum = F(headSum + contribution);
        inEndpoints[k] = endpointMark[k * n + i]!;
        endpointMatches += inEndpoints[k]!;
      }
      let covered = 0;
      let headCovered = 0;
      for (const g of groups) {
        let any = 0;
        let head = 0;
        for (const t of g.terms) {
          if (t.at < 0) continue;
          if (inHead[t.at] || inEndpoints[t.at]) any = Math.max(any, t.weight);
          if (inHead[t.at]) head = Math.max(head, t.weight);
        }
        covered += any;
        headCovered += head;
      }
      const textRank = L ? F(headSum / L) : 0;
      const endpointRank = L && api.endpointLexemes ? F(F(F((endpointMatches * RANK_WEIGHTS[0]!) / 1.64493406685) / L) / F(Math.log2(api.endpointLexemes + 1))) : 0;
      const coverage = covered / total;
      const headCoverage = headCovered / total;
      const sim = nameSimilarity.get(i) ?? 0;
      const relevance =
        Math.min(textRank, 1) +
        Math.min(endpointRank * 20, 1) * 0.6 +
        coverage * 1.5 +
        headCoverage * 0.5 +
        (sim >= 0.6 ? sim * 0.8 : 0) +
        api.popularity * 0.15 +
        (api.featured ? 0.05 : 0);
      top.offer(api, relevance + Math.min(api.votes_up - api.votes_down, 10) * 0.005, coverage);
    }
    for (let k = 0; k < L; k++) {
      const head = headPostings[k];
      if (head) for (let j = 0; j < head.apis.length; j++) headMark[k * n + head.apis[j]!] = 0;
      const endpoint = endpointPostings[k];
      if (endpoint) for (let j = 0; j < endpoint.length; j++) endpointMark[k * n + endpoint[j]!] = 0;
    }
    return top.sorted();
  }
}

/** Each distinct lower-cased word of the endpoints' summaries and paths, with the endpoints using it (once per use). */
function endpointWords(endpoints: IndexedEndpoint[]): { words: string[]; endpoints: number[][] } {
  const byWord = new Map<string, number[]>();
  endpoints.forEach((e, at) => {
    for (const word of (e.summary ? `${e.summary} ${e.path}` : e.path).toLowerCase().split(/[^\p{L}\p{N}_]+/u)) {
      if (!word) continue;
      let uses = byWord.get(word);
      if (!uses) byWord.set(word, (uses = []));
      uses.push(at);
    }
  });
  const words = [...byWord.keys()].sort();
  return { words, endpoints: words.map((w) => byWord.get(w)!) };
}

/** Best first, then by id (the order of the SQL ranking: score desc, id). */
const better = (a: IndexHit, b: IndexHit) => a.score > b.score || (a.score === b.score && a.api.id < b.api.id);

/** The best `limit` hits of a stream (a bounded min-heap), without sorting every candidate. */
class TopHits {
  private readonly heap: IndexHit[] = [];
  constructor(private readonly limit: number) {}

  offer(api: IndexedApi, score: number, coverage: number): void {
    const heap = this.heap;
    if (this.limit <= 0) return;
    if (heap.length < this.limit) {
      heap.push({ api, score, coverage });
      let at = heap.length - 1;
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (!better(heap[parent]!, heap[at]!)) break;
        [heap[parent], heap[at]] = [heap[at]!, heap[parent]!];
        at = parent;
      }
      return;
    }
    const hit = { api, score, coverage };
    if (!better(hit, heap[0]!)) return;
    heap[0] = hit;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let worst = at;
      if (left < heap.length && better(heap[worst]!, heap[left]!)) worst = left;
      if (right < heap.length && better(heap[worst]!, heap[right]!)) worst = right;
      if (worst === at) break;
      [heap[worst], heap[at]] = [heap[at]!, heap[worst]!];
      at = worst;
    }
  }

  sorted(): IndexHit[] {
    return [...this.heap].sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0));
  }
}


interface ApiLoadRow {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  categories: string[];
  description: string;
  price_micros: bigint;
  featured: boolean;
  popularity: number;
  search_name: string;
  head: string;
  endpoint: string;
  endpoints: IndexedEndpoint[] | null;
}

export async function loadVotes(db: Db): Promise<Map<string, { up: number; down: number }>> {
  const rows = await db<{ id: string; up: number; down: number }[]>`
    select target_id as id, count(*) filter (where value = 1)::int as up, count(*) filter (where value = -1)::int as down
      from votes where target_type = 'api' group by target_id`;
  return new Map(rows.map((r) => [r.id, { up: r.up, down: r.down }]));
}

/** Reads the catalog's ranking data from Postgres (one snapshot) and builds the index. */
export async function loadDirectoryIndex(db: Db, extraWords: readonly string[] = []): Promise<DirectoryIndex> {
  const read = async (tx: Db) => {
    const apis = await tx<ApiLoadRow[]>`
      select id, name, provider, service, categories, left(description, 300) as description, price_micros, featured, popularity,
             search_name, search_vector::text as head, endpoint_vector::text as endpoint,
             endpoints
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
  const indexed: IndexedApi[] = apis.map((row, i) => ({
    id: row.id,
    name: row.name,
    provider: row.provider,
    service: row.service,
    categories: row.categories,
    description: row.description,
    price_micros: row.price_micros,
    featured: row.featured,
    popularity: row.popularity,
    votes_up: votes.get(row.id)?.up ?? 0,
    votes_down: votes.get(row.id)?.down ?? 0,
    endpoints: Array.isArray(row.endpoints) ? row.endpoints : [],
    nameTrigrams: trigrams(row.search_name),
    endpointLexemes: vectors[i]!.endpoint.length,
  }));
  const known = words.filter((w) => w.ndoc !== null).map((w) => ({ word: w.word, ndoc: w.ndoc!, lexeme: w.lexeme }));
  const index = new DirectoryIndex(indexed, vectors, known);
  for (const w of words) if (w.ndoc === null) index.addLexeme(w.word, w.lexeme);
  return index;
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

/**
 * One index per database handle, loaded on first use and kept current by LISTEN: a change to the
 * catalog reloads it (debounced; answers come from the previous index meanwhile), a vote reloads
 * only the tallies.
 */
class IndexHolder {
  private ready: DirectoryIndex | null = null;
  private pending: Promise<DirectoryIndex> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private firstChangeAt = 0;
  private loading = false;
  private again = false;

  constructor(private readonly db: Db) {}

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
        await (this.db as Sql).listen(
          DIRECTORY_CHANNEL,
          (payload) => this.changed(payload),
          // Called again after a reconnect: notifications may have been missed meanwhile.
          () => {
            if (this.ready) this.schedule();
          },
        );
      } catch {
        // Without notifications the index stays as loaded (a database without LISTEN support).
      }
    }
    this.ready = await loadDirectoryIndex(this.db, VOCABULARY_TERMS);
    return this.ready;
  }

  private changed(payload: string): void {
    if (payload === 'votes' && this.ready) {
      const index = this.ready;
      loadVotes(this.db)
        .then((tallies) => index.setVotes(tallies))
        .catch(() => {});
      return;
    }
    this.schedule();
  }

  private schedule(): void {
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
      this.ready = await loadDirectoryIndex(this.db, VOCABULARY_TERMS);
    } catch {
      // Keep answering from the previous index; the next change retries.
    } finally {
      this.loading = false;
      if (this.again) this.schedule();
    }
  }
}

const holders = new WeakMap<object, IndexHolder>();

/** The in-process index of the catalog behind `db` (loaded on first use, then kept current). */
export function directoryIndex(db: Db): DirectoryIndex | Promise<DirectoryIndex> {
  let holder = holders.get(db);
  if (!holder) holders.set(db, (holder = new IndexHolder(db)));
  return holder.get();
}
