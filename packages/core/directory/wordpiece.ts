/**
 * BERT's uncased WordPiece tokenizer, as the embedding model was trained with it and as Hugging Face's
 * `tokenizers` runs it from the model's tokenizer.json (BertNormalizer, BertPreTokenizer, WordPiece).
 * The build writes token ids of that tokenizer into reference.json; the tests hold this one to them.
 *
 * Characters assigned in recent Unicode versions (about 900, none common) can differ: Hugging Face's
 * tables are older than the JavaScript engine's.
 */

const MAX_WORD_CHARS = 100;
// Written in the text, these are the special tokens themselves (as in Hugging Face's tokenizer).
const SPECIAL_TOKENS = /(\[(?:PAD|UNK|CLS|SEP|MASK)\])/;

// Other characters (Cc, Cf, Co, Cs) are dropped, but not unassigned ones (Cn): those become [UNK].
const CONTROL = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/u;
const isControl = (ch: string) => ch !== '\t' && ch !== '\n' && ch !== '\r' && CONTROL.test(ch);
const WHITESPACE = /\p{White_Space}/u;
const NONSPACING_MARKS = /\p{Mn}/gu;
// Words end at whitespace and at each punctuation character; ASCII symbols ("$", "+", "^") count as
// punctuation, as in BERT.
const SPLIT = /(\p{White_Space}+|[!-/:-@[-`{-~]|\p{P})/u;

/** The CJK Unified Ideographs blocks: each such character is a word of its own. */
function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

/** Cleans the text, spaces out CJK characters, strips accents and lower-cases, in that order. */
function normalize(text: string): string {
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (cp === 0 || cp === 0xfffd || isControl(ch)) continue;
    if (WHITESPACE.test(ch)) out += ' ';
    else if (isCjk(cp)) out += ` ${ch} `;
    else out += ch;
  }
  // Hugging Face lower-cases each character alone: Σ is always σ, never the final ς.
  return out.normalize('NFD').replace(NONSPACING_MARKS, '').replace(/Σ/g, 'σ').toLowerCase();
}

/** Words and single punctuation characters, whitespace dropped. */
function preTokenize(text: string): string[] {
  return text.split(SPLIT).filter((part) => part !== '' && !WHITESPACE.test(part[0]!));
}

export class WordPiece {
  private readonly ids = new Map<string, number>();
  private readonly cls: number;
  private readonly sep: number;
  private readonly unk: number;

  /** `vocab` is vocab.txt: one token a line, the line number is its id. */
  constructor(vocab: string) {
    vocab.split('\n').forEach((line, id) => {
      const token = line.replace(/\r$/, '');
      if (token !== '' && !this.ids.has(token)) this.ids.set(token, id);
    });
    const special = (token: string) => {
      const id = this.ids.get(token);
      if (id === undefined) throw new Error(`the vocabulary has no ${token} token`);
      return id;
    };
    this.cls = special('[CLS]');
    this.sep = special('[SEP]');
    this.unk = special('[UNK]');
  }

  /** `[CLS] pieces [SEP]`, at most `maxTokens` ids: the pieces are cut, [SEP] is kept. */
  encode(text: string, maxTokens = 128): number[] {
    const limit = maxTokens - 2;
    const out = [this.cls];
    text.split(SPECIAL_TOKENS).forEach((part, at) => {
      if (at % 2 === 1) out.push(this.ids.get(part) ?? this.unk);
      else
        for (const word of preTokenize(normalize(part))) {
          if (out.length - 1 >= limit) break;
          this.pieces(word, out);
        }
    });
    out.length = Math.min(out.length, limit + 1);
    out.push(this.sep);
    return out;
  }

  /** Greedy longest-match-first; a word that cannot be covered entirely is one [UNK]. */
  private pieces(word: string, out: number[]): void {
    const chars = Array.from(word);
    if (chars.length > MAX_WORD_CHARS) {
      out.push(this.unk);
      return;
    }
    const found: number[] = [];
    for (let start = 0; start < chars.length;) {
      let end = chars.length;
      let id: number | undefined;
      for (; end > start; end--) {
        const piece = chars.slice(start, end).join('');
        id = this.ids.get(start > 0 ? `##${piece}` : piece);
        if (id !== undefined) break;
      }
      if (id === undefined) {
        out.push(this.unk);
        return;
      }
      found.push(id);
      start = end;
    }
    out.push(...found);
  }
}
