/**
 * The need of a task, told from its setting (issue 35): "text the whole team | that practice is off
 * because of the rain", "draw a logo | for my lemonade stand", "a photo of a family | on the beach
 * for our travel brochure". People and agents state what they need first (an action and its object,
 * or just the object) and then say when, where, why or for whom; the words of that setting ("rain",
 * "beach", "train") pull discovery towards the wrong kind of service.
 *
 * The cut is made with a part-of-speech signal from WordNet (wordnet.ts `partsOfSpeech`: how often
 * each of a word's uses is tagged as a noun, verb, adjective or adverb in WordNet's hand-tagged
 * running text): the need ends at the first word that opens a setting
 * - a clause ("when", "while", "because", "that", ...) once the need holds a word of content, or
 * - a preposition ("on", "for", "in", "to", ...) once it holds a noun: the action's object, so that
 *   a verb's own preposition stays ("listen to my articles", "who scored in last night's games").
 * A word WordNet does not know (a name: "Lakers", "Ascot") counts as a noun.
 */
import { ENGLISH_STOPWORDS } from './scoring.js';
import { DISCOVERY_STOPWORDS } from './vocabulary.js';
import { partsOfSpeech } from './wordnet.js';

/** Words that open a clause of circumstance, reason or comparison. */
const CLAUSE_OPENERS = new Set('when whenever while before after because since until unless though although than instead so once'.split(' '));
/**
 * Prepositions, and the conjunctions of a content clause, that open a setting once the action has
 * its object ("check that a company's tax number is real": the clause is the object).
 */
const PREPOSITIONS = new Set('on at in for during from near with without to by via across around through within inside that whether if'.split(' '));

export interface Need {
  /** The need's words, in order (a prefix of the task's words). */
  words: string[];
  /** Its text, embedded as a task of its own. */
  text: string;
}

/** Whether a word is used mostly as a noun (or is a name WordNet does not know). */
function isNoun(word: string): boolean {
  if (!/^[a-z]+$/.test(word)) return true;
  const pos = partsOfSpeech(word);
  const noun = pos.noun ?? 0;
  if (noun === 0) return Object.keys(pos).length === 0;
  return noun >= (pos.verb ?? 0) && noun >= (pos.adj ?? 0) && noun >= (pos.adv ?? 0);
}

const memo = new Map<string, Need | null>();

/**
 * The need of a normalized task (lower case, words separated by one space): its words up to the
 * first setting, or null when the task has no setting to leave out (or the need would be empty).
 */
export function needOf(normalized: string): Need | null {
  const known = memo.get(normalized);
  if (known !== undefined) return known;
  const words = normalized.split(' ').filter(Boolean);
  let content = false;
  let noun = false;
  let end = words.length;
  for (let k = 0; k < words.length; k++) {
    const word = words[k]!;
    if ((CLAUSE_OPENERS.has(word) && content) || (PREPOSITIONS.has(word) && noun)) {
      end = k;
      break;
    }
    // Filler ("i want to", "please", "a way to") is neither the action nor its object.
    if (ENGLISH_STOPWORDS.has(word) || DISCOVERY_STOPWORDS.has(word)) continue;
    content = true;
    if (isNoun(word)) noun = true;
  }
  const need = end < words.length && end > 0 ? { words: words.slice(0, end), text: words.slice(0, end).join(' ') } : null;
  if (memo.size >= 10_000) memo.clear();
  memo.set(normalized, need);
  return need;
}
