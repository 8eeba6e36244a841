// The ranking's scoring primitives, reproducing Postgres in memory: ts_rank's per-lexeme
// contributions from tsvector weights, and pg_trgm's trigram similarity and word_similarity.

/** Postgres' english.stop: to_tsquery('english', ...) drops these. */
export const ENGLISH_STOPWORDS = new Set(
  (
    'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its itself ' +
    'they them their theirs themselves what which who whom this that these those am is are was were be been being have has had having ' +
    'do does did doing a an the and but if or because as until while of at by for with about against between into through during before ' +
    'after above below to from up down in out on off over under again further then once here there when where why how all any both each ' +
    'few more most other some such no nor not only own same so than too very s t can will just don should now'
  ).split(' '),
);

/** ts_rank's default weights, indexed by position weight D=0, C=1, B=2, A=3. */
export const RANK_WEIGHTS = [0.1, 0.2, 0.4, 1.0];
export const F = Math.fround;

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
        if (found[tid]) {
          tmpCount--;
          // No later extent can beat the current one: each shares at most tmpCount trigrams, so its
          // similarity is at most tmpCount / querySize (pg_trgm tries them all; the answer is the same).
          if (F(tmpCount / querySize) <= current) break;
        }
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
export function rankContribution(weights: number[]): number {
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
export function parseTsvector(text: string): Map<string, number[]> {
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

/**
 * The optimal string alignment distance of two words: insertions, deletions, substitutions and
 * transpositions of adjacent letters, each counting one ("recipies" is one from "recipes", two from "recipient").
 */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      current[j] = d;
    }
    [before, previous, current] = [previous, current, before];
  }
  return previous[b.length]!;
}
