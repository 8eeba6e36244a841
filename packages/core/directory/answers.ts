/**
 * The search and discovery answers as JSON bytes, rendered where the ranking runs (the edge's event
 * loop, or a ranking worker: see rank-pool.ts) and sent as they are.
 *
 * An API summary found in the in-process index is encoded to UTF-8 once per index load (all but its
 * vote count, appended per answer), so an answer is mostly copied from ready bytes. Encoding the
 * whole answer as one string per request cost about a fifth of a search's CPU under load: about
 * 40 % of the answers hold characters outside Latin-1 (descriptions), which makes the string
 * two-byte and its UTF-8 encoding slow, and Fastify scanned it once more for Content-Length.
 */
import { toDollars } from '#contracts/money';
import type { ApiSummary } from '#contracts/directory';
import { discover, searchApis, type ApiPage, type RankedRow } from './catalog.js';
import type { LiveDirectoryIndex } from './index-loader.js';
import type { ApiSummaryRow, IndexedApi } from './index-types.js';
import { UNCATEGORIZED } from './search-index.js';

/** An API's public summary (the `apiSummary` contract) from its row. */
export function toApiSummary(row: ApiSummaryRow): ApiSummary {
  return {
    id: row.id,
    name: row.name,
    provider: row.provider,
    service: row.service,
    category: row.categories[0] ?? UNCATEGORIZED,
    categories: row.categories,
    description: row.description,
    pricePerCall: toDollars(row.price_micros),
    featured: row.featured,
    votes: row.votes_up - row.votes_down,
  };
}

/** JSON text assembled from pieces and copied once into one buffer. */
class JsonBytes {
  private readonly parts: (Buffer | string)[] = [];
  /** Per part: 0 bytes, 1 ASCII text, 2 any text (UTF-8). */
  private readonly kinds: number[] = [];
  private length = 0;

  /** Bytes already encoded. */
  bytes(buffer: Buffer): this {
    this.parts.push(buffer);
    this.kinds.push(0);
    this.length += buffer.length;
    return this;
  }

  /** Text known to be ASCII (punctuation, keys, numbers): one byte per character. */
  ascii(text: string): this {
    this.parts.push(text);
    this.kinds.push(1);
    this.length += text.length;
    return this;
  }

  /** Any text (JSON.stringify's output). */
  text(text: string): this {
    this.parts.push(text);
    this.kinds.push(2);
    this.length += Buffer.byteLength(text);
    return this;
  }

  /**
   * The bytes, in a buffer of their own (not a slice of Node's shared pool: it may be transferred to
   * another thread). Bytes and ASCII text are copied in JavaScript (TypedArray#set, a loop): a native
   * call per small piece costs more than the copy.
   */
  toBuffer(): Buffer {
    const out = Buffer.allocUnsafeSlow(this.length);
    let at = 0;
    for (let k = 0; k < this.parts.length; k++) {
      const part = this.parts[k]!;
      if (typeof part !== 'string') {
        out.set(part, at);
        at += part.length;
      } else if (this.kinds[k] === 1) {
        for (let c = 0; c < part.length; c++) out[at++] = part.charCodeAt(c);
      } else {
        at += out.write(part, at, 'utf8');
      }
    }
    return out;
  }
}

/** Per API of the loaded index, its summary's JSON without the vote count and the closing brace. */
const summaryHeads = new WeakMap<IndexedApi, Buffer>();

function writeSummary(out: JsonBytes, row: ApiSummaryRow | RankedRow): void {
  const indexed = 'indexed' in row ? row.indexed : undefined;
  if (!indexed) {
    out.text(JSON.stringify(toApiSummary(row)));
    return;
  }
  let head = summaryHeads.get(indexed);
  if (head === undefined) {
    const { votes: _votes, ...rest } = toApiSummary(row);
    head = Buffer.from(JSON.stringify(rest).slice(0, -1));
    summaryHeads.set(indexed, head);
  }
  out.bytes(head).ascii(`,"votes":${row.votes_up - row.votes_down}}`);
}

/** GET /apis: a page of summaries (browse or search), as JSON bytes. */
export function apiPageAnswer(page: ApiPage, searched: boolean, cursor: string | undefined): Buffer {
  const out = new JsonBytes().ascii('{"ok":true,"apis":[');
  page.apis.forEach((row, k) => {
    if (k > 0) out.ascii(',');
    writeSummary(out, row);
  });
  out.ascii('],"nextCursor":').text(JSON.stringify(page.nextCursor));
  if (searched && page.apis.length === 0 && !cursor) {
    out.ascii(',"hint":').text(JSON.stringify('No API matched; try fewer or more general words, or GET /api/v1/discover?q=<your task>.'));
  }
  return out.ascii('}').toBuffer();
}

export interface SearchRequest {
  q: string;
  category?: string | undefined;
  limit: number;
  cursor?: string | undefined;
}

/** GET /apis?q=: relevance search in the in-process index, as JSON bytes. */
export async function searchAnswer(index: LiveDirectoryIndex, request: SearchRequest): Promise<Buffer> {
  return apiPageAnswer(await searchApis(index, request), true, request.cursor);
}

export interface DiscoverRequest {
  /** The task as the caller wrote it. */
  text: string;
  limit: number;
}

/** GET /discover: natural-language discovery in the in-process index, as JSON bytes. */
export async function discoverAnswer(index: LiveDirectoryIndex, request: DiscoverRequest): Promise<Buffer> {
  const { results, plan } = await discover(index, request.text, request.limit);
  const out = new JsonBytes().ascii('{"ok":true,"query":').text(JSON.stringify(request.text)).ascii(',"results":[');
  results.forEach((r, k) => {
    out.ascii(k > 0 ? ',{"api":' : '{"api":');
    writeSummary(out, r.api);
    out
      .ascii(`,"score":${JSON.stringify(r.score)},"reason":`)
      .text(JSON.stringify(r.reason))
      .ascii('}');
  });
  out.ascii('],"interpreted":').text(JSON.stringify({ words: plan.words, corrections: plan.corrections, expansions: plan.expansions }));
  if (results.length === 0) {
    const hint = `No API matched ${plan.words.map((w) => `"${w}"`).join(', ')}. Describe the task with other words (what the API should do, e.g. "send email", "geocode an address"), or browse GET /api/v1/categories.`;
    out.ascii(',"hint":').text(JSON.stringify(hint));
  }
  return out.ascii('}').toBuffer();
}
