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
import { TopHits } from './top-hits.js';
import { ENGLISH_STOPWORDS, RANK_WEIGHTS, F, editDistance, rankContribution, trigrams, wordSimilarity } from './scoring.js';
import type { IndexedEndpoint, IndexedApi, HeadPostings, VocabularyWord, RankRequest, IndexHit } from './index-types.js';
import type { DenseVectors } from './semantic.js';
import { OperationIndex } from './operation-index.js';
import { CAPABILITIES } from './capabilities.js';

/** At most this many APIs join a capability by their own text per word set (as many again by an operation). */
const CAPABILITY_MEMBERS = 30;
/** A member with this many operations naming its kind's words offers the whole of it (`capabilityDepth`). */
const CAPABILITY_DEPTH_OPERATIONS = 8;

export const UNCATEGORIZED = 'uncategorized';

export class DirectoryIndex {
  readonly apis: IndexedApi[];
  readonly loadedAt = Date.now();
  /** The APIs' sentence embeddings (row i is API i), when the model and stored vectors are there. */
  readonly dense: DenseVectors | null;
  /** Every endpoint as a retrieval unit of its own (discovery; operation-index.ts). */
  readonly operations: OperationIndex;
  /** The embedded descriptions of CAPABILITIES (capabilities.ts), in order; null without the model. */
  readonly capabilityVectors: Float32Array[] | null;
  /** Per capability, its member APIs (positions), found once per load by its terms. */
  readonly capabilityMembers: number[][];
  /**
   * Per capability, per member (position), how much of the kind it offers, in [0, 1]: log2(1 + n) /
   * log2(1 + CAPABILITY_DEPTH_OPERATIONS), at most 1, where n is how many of its operations name any of the
   * kind's words. A general provider of a kind offers many operations for it (Google Translate, ShipEngine);
   * a service bound to its own platform offers one (eBay's translation of listings, its sellers' labels).
   */
  readonly capabilityDepth: Map<number, number>[];
  /**
   * Per capability, the APIs close in meaning to its description (capabilities.ts, `capabilityKin`:
   * positions and similarities, closest first); null without the model.
   */
  readonly capabilityKin: { at: Int32Array; similarity: Float32Array }[] | null;
  /**
   * Per API (position), its feedback signal in [0, 1] (feedback.ts, `feedbackSignal`): 0 until the
   * index's owner reads the accounts' use (LiveDirectoryIndex with `feedbackRefreshMs`).
   */
  readonly feedback: Float32Array;
  /** Per API (position), the accounts that used it in the feedback window (the signal's `used`), for reasons. */
  readonly feedbackAccounts: Uint32Array;
  private readonly byId = new Map<string, number>();
  /** Per API, float4(log2(endpoint lexemes + 1)): ts_rank's length normalization of the endpoint rank. */
  private readonly endpointNorm: Float64Array;
  private readonly head = new Map<string, HeadPostings>();
  private readonly endpoint = new Map<string, number[]>();
  /** Name trigrams as ids: per API its sequence, per trigram the APIs using it. */
  private readonly nameTrigramIds = new Map<string, number>();
  private readonly nameTrigramSequences: Int32Array[] = [];
  private readonly nameTrigramPostings: number[][] = [];
  /** Per API, its distinct name trigram ids. */
  private readonly nameTrigramSets: Int32Array[] = [];
  private nameTrigramScratch: { found: Uint8Array; lastPos: Int32Array } | null = null;
  private readonly vocabulary = new Map<string, VocabularyWord>();
  private readonly vocabularyList: VocabularyWord[] = [];
  private readonly vocabularyTrigrams = new Map<string, number[]>();
  /** Lexemes of the vocabulary's terms that are not catalog words. */
  private readonly extraLexemes: ReadonlyMap<string, string | null>;
  private scratch: { candidate: Uint8Array; shared: Int32Array } | null = null;
  private marks: { head: Float32Array; endpoint: Uint8Array } | null = null;
  private vocabularyShared: Int32Array | null = null;
  private endpointHits: Int32Array | null = null;
  private wordMarks: Uint8Array | null = null;
  private readonly corrections = new Map<string, { word: string; ndoc: number } | null>();

  /**
   * `words`: the catalog's words; `extraLexemes`: the lexemes of terms the vocabulary adds that no API
   * uses (word -> lexeme, null for a stop word); `dense`: the APIs' embeddings, row i for API i.
   */
  constructor(
    apis: IndexedApi[],
    vectors: { head: Map<string, number[]>; endpoint: string[] }[],
    words: { word: string; ndoc: number; lexeme: string | null }[],
    extra: {
      extraLexemes?: ReadonlyMap<string, string | null>;
      dense?: DenseVectors | null;
      capabilities?: Float32Array[] | null;
      kin?: { at: Int32Array; similarity: Float32Array }[] | null;
    } = {},
  ) {
    this.apis = apis;
    this.extraLexemes = extra.extraLexemes ?? new Map();
    this.dense = extra.dense ?? null;
    this.operations = new OperationIndex(apis);
    this.capabilityVectors = extra.capabilities ?? null;
    this.capabilityKin = extra.kin ?? null;
    this.feedback = new Float32Array(apis.length);
    this.feedbackAccounts = new Uint32Array(apis.length);
    this.endpointNorm = Float64Array.from(apis, (api) => F(Math.log2(api.endpointLexemes + 1)));
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
      this.nameTrigramSets.push(Int32Array.from(new Set(sequence)));
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
    // Once the postings and the vocabulary are in place.
    // Found with or without the model: a task's need phrases name capabilities by words (vocabulary.ts).
    // A kind its providers describe in more than one way (`also`) has the members of each: those of another wording
    // (and, with `ownText`, of its terms) hold it in their own text or in one operation, not over all their operations.
    this.capabilityMembers = CAPABILITIES.map((c) => [
      ...new Set([...this.membersOf(c.terms, !c.ownText), ...(c.also ?? []).flatMap((terms) => this.membersOf(terms, false))]),
    ]);
    this.capabilityDepth = CAPABILITIES.map((c, i) => {
      const lexemes = [c.terms, ...(c.also ?? [])].flatMap((terms) => terms.split(' ')).map((t) => this.lexeme(t) ?? t);
      const depth = (at: number) =>
        Math.min(1, Math.log2(1 + this.operations.countNamingAny(at, lexemes)) / Math.log2(1 + CAPABILITY_DEPTH_OPERATIONS));
      return new Map(this.capabilityMembers[i]!.map((at) => [at, depth(at)]));
    });
  }

  /**
   * A capability's member APIs: those whose text (name, categories, description, and with `overOperations` all
   * their endpoints' words together) holds every one of its terms (the CAPABILITY_MEMBERS with the highest text rank for them), then those
   * with an operation naming every one of them.
   */
  private membersOf(terms: string, overOperations: boolean): number[] {
    const lexemes = terms.split(' ').map((t) => this.lexeme(t) ?? t);
    const rankOf = new Map<number, number>();
    lexemes.forEach((lexeme, k) => {
      const postings = this.head.get(lexeme);
      const next = new Map<number, number>();
      // In its endpoints, a term counts as ts_rank's weight D would; in its own text, with its weight.
      if (overOperations)
        for (const at of this.endpoint.get(lexeme) ?? []) if (k === 0 || rankOf.has(at)) next.set(at, (rankOf.get(at) ?? 0) + RANK_WEIGHTS[0]!);
      postings?.apis.forEach((at, j) => {
        if (k === 0 || rankOf.has(at)) next.set(at, (rankOf.get(at) ?? 0) + postings.contributions[j]!);
      });
      rankOf.clear();
      for (const [at, r] of next) rankOf.set(at, r);
    });
    // Ranked like a search for them: text rank, then the curated popularity and featured flag.
    const score = (at: number, r: number) => r / lexemes.length + this.apis[at]!.popularity * 0.15 + (this.apis[at]!.featured ? 0.05 : 0);
    const members = [...rankOf]
      .map(([at, r]) => [at, score(at, r)] as const)
      .sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, CAPABILITY_MEMBERS)
      .map(([at]) => at);
    const found = new Set(members);
    for (const at of this.operations.naming(lexemes)) {
      if (found.size >= CAPABILITY_MEMBERS * 2) break;
      found.add(at);
    }
    return [...found];
  }

  api(id: string): IndexedApi | undefined {
    const at = this.byId.get(id);
    return at === undefined ? undefined : this.apis[at];
  }

  /** An API's position in `apis` (and in `dense`'s rows). */
  position(id: string): number | undefined {
    return this.byId.get(id);
  }

  /**
   * The three endpoints of an API whose summary and path have the most words starting with one of
   * `stems` (a word-prefix match, like Postgres' \m(stem|...) counted with regexp_count), first in
   * the description on a tie.
   */
  matchingEndpoints(api: IndexedApi, stems: readonly string[]): IndexedEndpoint[] {
    if (stems.length === 0) return [];
    const index = (api.endpointWords ??= endpointWords(api.endpoints));
    const words = index.words;
    // Per endpoint, its number of matched words (scratch of the index: reasons are built synchronously).
    if (!this.endpointHits || this.endpointHits.length < api.endpoints.length)
      this.endpointHits = new Int32Array(Math.max(api.endpoints.length, 256));
    if (!this.wordMarks || this.wordMarks.length < words.length) this.wordMarks = new Uint8Array(Math.max(words.length, 1024));
    const hits = this.endpointHits;
    const marks = this.wordMarks;
    const matched: number[] = [];
    const touched: number[] = [];
    // The words are sorted: the words starting with a stem are one range, found by binary search.
    for (const stem of stems) {
      let lo = 0;
      let hi = words.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (words[mid]! < stem) lo = mid + 1;
        else hi = mid;
      }
      for (let k = lo; k < words.length && words[k]!.startsWith(stem); k++) {
        if (marks[k]) continue;
        marks[k] = 1;
        matched.push(k);
        for (const at of index.endpoints[k]!) {
          if (hits[at] === 0) touched.push(at);
          hits[at] = hits[at]! + 1;
        }
      }
    }
    for (const k of matched) marks[k] = 0;
    // The three with the most hits, the first in the description on a tie.
    const best: number[] = [];
    for (const at of touched) {
      let place = best.length;
      while (place > 0 && (hits[at]! > hits[best[place - 1]!]! || (hits[at] === hits[best[place - 1]!] && at < best[place - 1]!))) place--;
      if (place < 3) {
        best.splice(place, 0, at);
        if (best.length > 3) best.pop();
      }
    }
    for (const at of touched) hits[at] = 0;
    return best.map((at) => api.endpoints[at]!);
  }

  get size(): number {
    return this.apis.length;
  }

  /** Number of APIs using a catalog word (directory_words.ndoc), undefined for a word the catalog never uses. */
  documentFrequency(word: string): number | undefined {
    return this.vocabulary.get(word)?.ndoc;
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
   * The spelling correction of a word the catalog never uses: of the catalog words at least 0.45 alike by trigram
   * similarity, the fewest edits away (editDistance), then the most alike, then the most used.
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
    let bestDistance = Number.POSITIVE_INFINITY;
    for (const at of touched) {
      const count = shared[at]!;
      shared[at] = 0;
      const candidate = this.vocabularyList[at]!;
      const sim = F(count / (grams.size + candidate.trigrams - count));
      if (sim < 0.45) continue;
      const distance = editDistance(word, candidate.word);
      if (
        !best ||
        distance < bestDistance ||
        (distance === bestDistance &&
          (sim > bestSimilarity ||
            (sim === bestSimilarity && (candidate.ndoc > best.ndoc || (candidate.ndoc === best.ndoc && candidate.word < best.word)))))
      ) {
        best = candidate;
        bestSimilarity = sim;
        bestDistance = distance;
      }
    }
    const result = best ? { word: best.word, ndoc: best.ndoc } : null;
    // Corrections depend on the index only; remember a bounded number of them.
    if (this.corrections.size >= 10_000) this.corrections.clear();
    this.corrections.set(word, result);
    return result;
  }

  /** Sets every API's feedback signal and account count (absent from `signals`: 0). */
  setFeedback(signals: ReadonlyMap<string, { signal: number; accounts: number }>): void {
    this.apis.forEach((api, at) => {
      const feedback = signals.get(api.id);
      this.feedback[at] = feedback?.signal ?? 0;
      this.feedbackAccounts[at] = feedback?.accounts ?? 0;
    });
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
    // ...and the APIs whose name resembles the query (typos in names): only those sharing at least
    // `needed` of its trigrams can reach a word similarity of 0.6 (similarity = shared / (query +
    // extent - shared) <= shared / query). Such a name shares at least one of the m - needed + 1
    // rarest of the query's m catalog trigrams (else it shares at most needed - 1 of the others), so
    // only those trigrams' postings are walked (prefix filtering; common trigrams such as "  a" list
    // most APIs), and a name found there counts its shared trigrams in its own distinct trigrams.
    // This stage, word_similarity included, was about half of a search's ranking time.
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
      const needed = Math.ceil(0.6 * queryTrigrams.size);
      const prefix = queryIds.length - needed + 1;
      if (prefix > 0) {
        for (const id of queryIds) names.found[id] = 1;
        queryIds.sort((a, b) => this.nameTrigramPostings[a]!.length - this.nameTrigramPostings[b]!.length);
        const sharing: number[] = [];
        for (let q = 0; q < prefix; q++) {
          const postings = this.nameTrigramPostings[queryIds[q]!]!;
          for (let k = 0; k < postings.length; k++) {
            const i = postings[k]!;
            if (shared[i] === 0) {
              shared[i] = 1;
              sharing.push(i);
            }
          }
        }
        const found = names.found;
        for (const i of sharing) {
          shared[i] = 0;
          // Its distinct trigrams the query has, stopping as soon as the answer is known.
          const distinct = this.nameTrigramSets[i]!;
          let count = 0;
          for (let k = 0; k < distinct.length && count < needed && count + distinct.length - k >= needed; k++) count += found[distinct[k]!]!;
          if (count < needed) continue;
          const sequence = this.nameTrigramSequences[i]!;
          const sim = wordSimilarity(found, queryTrigrams.size, sequence, names.lastPos);
          nameSimilarity.set(i, sim);
          if (sim >= 0.6) touch(i);
        }
        for (const id of queryIds) found[id] = 0;
      }
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
    // The groups' terms as flat arrays, each group's heaviest first: a group counts with its first
    // matched term. Terms outside the ts_rank query (at -1) never match.
    const groupEnd = new Int32Array(groups.length);
    const termAt: number[] = [];
    const termWeight: number[] = [];
    groups.forEach((g, gi) => {
      for (const t of [...g.terms].sort((a, b) => b.weight - a.weight)) {
        if (t.at < 0) continue;
        termAt.push(t.at);
        termWeight.push(t.weight);
      }
      groupEnd[gi] = termAt.length;
    });
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
    // Each lexeme counts in the text ranks with its weight; with all weights 1 this is ts_rank's
    // sum over the query's lexemes divided by their number.
    const lexemeWeight = request.lexemeWeights ?? new Array<number>(L).fill(1);
    let weightSum = 0;
    for (let k = 0; k < L; k++) weightSum += lexemeWeight[k]!;
    const inHead = new Uint8Array(L);
    const inEndpoints = new Uint8Array(L);
    const category = request.category;
    const only = request.only;
    const endpointNorm = this.endpointNorm;
    const top = new TopHits(limit);
    for (const i of candidates) {
      const api = this.apis[i]!;
      if (category !== undefined && !(category === UNCATEGORIZED ? api.categories.length === 0 : api.categories.includes(category))) continue;
      if (only !== undefined && !only.has(api.id)) continue;
      let headSum = 0;
      let endpointMatches = 0;
      for (let k = 0; k < L; k++) {
        const contribution = headMark[k * n + i]!;
        const inEndpoint = endpointMark[k * n + i]!;
        inHead[k] = contribution > 0 ? 1 : 0;
        inEndpoints[k] = inEndpoint;
        if (contribution > 0) headSum = F(headSum + contribution * lexemeWeight[k]!);
        if (inEndpoint) endpointMatches += lexemeWeight[k]!;
      }
      let covered = 0;
      let headCovered = 0;
      let t = 0;
      for (let g = 0; g < groupEnd.length; g++) {
        const end = groupEnd[g]!;
        let any = 0;
        let head = 0;
        for (; t < end; t++) {
          const at = termAt[t]!;
          if (inHead[at]) {
            if (any === 0) any = termWeight[t]!;
            head = termWeight[t]!;
            break;
          }
          if (any === 0 && inEndpoints[at]) any = termWeight[t]!;
        }
        t = end;
        covered += any;
        headCovered += head;
      }
      const textRank = L ? F(headSum / weightSum) : 0;
      const endpointRank =
        L && api.endpointLexemes ? F(F(F((endpointMatches * RANK_WEIGHTS[0]!) / 1.64493406685) / weightSum) / endpointNorm[i]!) : 0;
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
