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
import { z } from 'zod';
import { toDollars } from '#contracts/money';
import type { ApiSummary, Callability, PriceRule } from '#contracts/directory';
import { pricingRuleSchema } from '#db/metered-apis';
import { NO_ACCESS, type AccessSnapshot, type CallabilityCatalog, type CallerAccess } from './callability.js';
import { discover, searchApis, type ApiPage, type RankedRow } from './catalog.js';
import type { LiveDirectoryIndex } from './index-loader.js';
import type { ApiSummaryRow, IndexedApi } from './index-types.js';
import { UNCATEGORIZED } from './search-index.js';

/** An API's public summary (the `apiSummary` contract) from its row and its state for the caller. */
export function toApiSummary(row: ApiSummaryRow, callability: Callability): ApiSummary {
  return { ...summaryOf(row), callability };
}

const storedRules = z.array(pricingRuleSchema);

/**
 * An API's per-path prices in micro-dollars (the `pricing_rules` jsonb the proxy prices by, core/gateway
 * pricing.ts), in the order they are tried; none when the stored rules do not parse, as the proxy
 * then applies none either.
 */
export function pricingRulesOf(stored: unknown): { method: string; path: string; priceMicros: bigint }[] {
  if (!Array.isArray(stored) || stored.length === 0) return [];
  const rules = storedRules.safeParse(stored);
  if (!rules.success) return [];
  return rules.data.map((rule) => ({ method: rule.method ?? '*', path: rule.path, priceMicros: rule.priceMicros }));
}

/** An API's per-path prices as answers show them (dollars). */
export function priceRulesOf(stored: unknown): PriceRule[] {
  return pricingRulesOf(stored).map((rule) => ({ method: rule.method, path: rule.path, pricePerCall: toDollars(rule.priceMicros) }));
}

/** The summary's fields that do not depend on the caller. */
function summaryOf(row: ApiSummaryRow): Omit<ApiSummary, 'callability'> {
  const priceRules = priceRulesOf(row.pricing_rules);
  return {
    id: row.id,
    name: row.name,
    provider: row.provider,
    service: row.service,
    category: row.categories[0] ?? UNCATEGORIZED,
    categories: row.categories,
    description: row.description,
    pricePerCall: toDollars(row.price_micros),
    ...(priceRules.length > 0 ? { priceRules } : {}),
    featured: row.featured,
    votes: row.votes_up - row.votes_down,
  };
}

/** Whose answer is rendered: the access snapshot and the caller's holdings (NO_ACCESS when anonymous). */
export interface AnswerView {
  snapshot: AccessSnapshot;
  caller: CallerAccess;
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

  /** Drops the last part written (a separator not followed by anything). */
  pop(): this {
    const part = this.parts.pop();
    this.kinds.pop();
    if (part !== undefined) this.length -= typeof part === 'string' ? Buffer.byteLength(part) : part.length;
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

/**
 * One summary; false (nothing written) for an API the access snapshot does not hold, which can only
 * be one deleted since it was ranked (see CallabilityCatalog.snapshotHolding).
 */
function writeSummary(out: JsonBytes, row: ApiSummaryRow | RankedRow, view: AnswerView): boolean {
  const callability = view.snapshot.json(row.id, view.caller);
  if (callability === null) return false;
  const indexed = 'indexed' in row ? row.indexed : undefined;
  if (!indexed) {
    out.text(JSON.stringify(summaryOf(row)).slice(0, -1));
  } else {
    let head = summaryHeads.get(indexed);
    if (head === undefined) {
      const { votes: _votes, ...rest } = summaryOf(row);
      head = Buffer.from(JSON.stringify(rest).slice(0, -1));
      summaryHeads.set(indexed, head);
    }
    out.bytes(head).ascii(`,"votes":${row.votes_up - row.votes_down}`);
  }
  out.ascii(',"callability":').text(callability).ascii('}');
  return true;
}

/** GET /apis: a page of summaries (browse or search), as JSON bytes. */
export function apiPageAnswer(page: ApiPage, searched: boolean, cursor: string | undefined, view: AnswerView): Buffer {
  const out = new JsonBytes().ascii('{"ok":true,"apis":[');
  let written = 0;
  for (const row of page.apis) {
    if (written > 0) out.ascii(',');
    if (writeSummary(out, row, view)) written++;
    else if (written > 0) out.pop();
  }
  out.ascii('],"nextCursor":').text(JSON.stringify(page.nextCursor));
  if (searched && page.apis.length === 0 && !cursor) {
    const hint = page.callableOnly
      ? 'No API you can call now matched; drop callable=true to see the others and what each needs (callability.hint).'
      : 'No API matched; try fewer or more general words, or GET /api/v1/discover?q=<your task>.';
    out.ascii(',"hint":').text(JSON.stringify(hint));
  }
  return out.ascii('}').toBuffer();
}

/** Who asks, and whether only the APIs they can call now are wanted (callable=true). */
export interface CallerView {
  /** The caller's holdings (NO_ACCESS, or absent, for an anonymous caller). */
  caller?: CallerAccess | undefined;
  callable?: boolean | undefined;
}

export interface SearchRequest extends CallerView {
  q: string;
  category?: string | undefined;
  limit: number;
  cursor?: string | undefined;
}

/** The view of an answer and, with callable=true, the ids it is limited to. */
async function viewOf(catalog: CallabilityCatalog, request: CallerView): Promise<{ view: AnswerView; only: ReadonlySet<string> | undefined }> {
  const snapshot = await catalog.snapshot();
  const caller = request.caller ?? NO_ACCESS;
  return { view: { snapshot, caller }, only: request.callable ? snapshot.readySet(caller) : undefined };
}

/** The view again from a snapshot holding every id to render (an API added since the snapshot was read). */
async function holding(catalog: CallabilityCatalog, view: AnswerView, ids: string[]): Promise<AnswerView> {
  return ids.every((id) => view.snapshot.facts(id) !== undefined) ? view : { ...view, snapshot: await catalog.snapshotHolding(ids) };
}

/** GET /apis?q=: relevance search in the in-process index, as JSON bytes. */
export async function searchAnswer(index: LiveDirectoryIndex, catalog: CallabilityCatalog, request: SearchRequest): Promise<Buffer> {
  const { view, only } = await viewOf(catalog, request);
  const page = await searchApis(index, { ...request, only });
  return apiPageAnswer(
    page,
    true,
    request.cursor,
    await holding(
      catalog,
      view,
      page.apis.map((a) => a.id),
    ),
  );
}

export interface DiscoverRequest extends CallerView {
  /** The task as the caller wrote it. */
  text: string;
  limit: number;
}

/** GET /discover: natural-language discovery in the in-process index, as JSON bytes. */
export async function discoverAnswer(index: LiveDirectoryIndex, catalog: CallabilityCatalog, request: DiscoverRequest): Promise<Buffer> {
  const { view: first, only } = await viewOf(catalog, request);
  const { results, plan, capabilities } = await discover(index, request.text, request.limit, only);
  const view = await holding(
    catalog,
    first,
    results.map((r) => r.api.id),
  );
  const out = new JsonBytes().ascii('{"ok":true,"query":').text(JSON.stringify(request.text)).ascii(',"results":[');
  let written = 0;
  for (const r of results) {
    out.ascii(written > 0 ? ',{"api":' : '{"api":');
    if (!writeSummary(out, r.api, view)) {
      out.pop();
      continue;
    }
    written++;
    out
      .ascii(`,"score":${JSON.stringify(r.score)},"reason":`)
      .text(JSON.stringify(r.reason))
      .ascii(',"matched":')
      .text(JSON.stringify(r.matched))
      .ascii(',"operations":')
      .text(JSON.stringify(r.operations.map(({ priceMicros, ...operation }) => ({ ...operation, price: toDollars(priceMicros) }))))
      .ascii('}');
  }
  out.ascii('],"interpreted":').text(JSON.stringify({ words: plan.words, corrections: plan.corrections, expansions: plan.expansions, capabilities }));
  if (results.length === 0 && request.callable) {
    out
      .ascii(',"hint":')
      .text(JSON.stringify('No API you can call now matched the task; drop callable=true to see the others and what each needs (callability.hint).'));
  } else if (results.length === 0) {
    const hint = `No API matched ${plan.words.map((w) => `"${w}"`).join(', ')}. Describe the task with other words (what the API should do, e.g. "send email", "geocode an address"), or browse GET /api/v1/categories.`;
    out.ascii(',"hint":').text(JSON.stringify(hint));
  }
  return out.ascii('}').toBuffer();
}
