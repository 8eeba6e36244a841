import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { apiId as API_ID } from '#contracts/directory';
import { toDollars } from '#contracts/money';
import { chargeCall, parseMaxCost, type ChargeReceipt } from '#core/billing';
import { proxyTarget, type AnswerSink } from '#core/gateway';
import type { Caller } from '#core/identity';
import { PlatformError } from '#core/platform';
import { CHARGE_META, MAX_COST, platformErrorResult, type ToolCaller } from './dispatch.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Headers a tool call may not set: the caller's credentials and the edge's own controls come from the MCP request and the tool's arguments. */
const RESERVED_HEADERS = new Set([
  'authorization',
  'x-api-key',
  'cookie',
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'x-max-cost',
  'x-request-id',
  'x-forwarded-for',
]);

/** Headers of the upstream's answer that describe its transfer, not its content. */
const TRANSFER_HEADERS = /^(content-length$|transfer-encoding$|connection$|keep-alive$)/i;

const TEXTUAL = /^(text\/|application\/(json|xml|javascript|ecmascript|x-www-form-urlencoded|graphql|yaml|x-yaml|[\w.+-]+\+(json|xml)))/i;

/** The arguments of call_api; an agent key with an allow-list sees only its APIs as choices. */
export function callApiInput(allowedApis: readonly string[] | null) {
  const apiId = allowedApis && allowedApis.length > 0 ? z.enum(allowedApis as [string, ...string[]]) : API_ID;
  return z.object({
    apiId: apiId.describe('The directory API id, e.g. from discover_apis'),
    method: z.enum(METHODS).default('GET').describe('The HTTP method sent to the upstream'),
    path: z.string().max(4000).default('/').describe("The upstream path after the API's base URL, e.g. /v1/forecast (no query string: use query)"),
    query: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]))
      .optional()
      .describe('Query parameters for the upstream'),
    headers: z
      .record(z.string(), z.string())
      .optional()
      .describe('Extra request headers for the upstream (never your platform key: the MCP request carries it)'),
    body: z
      .union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .optional()
      .describe('Request body: text is sent as it is, an object or array as JSON'),
    maxCost: MAX_COST,
  });
}

export const callApiOutput = z.object({
  status: z.number().int().describe("The upstream's HTTP status"),
  headers: z.record(z.string(), z.string()).describe("The upstream's response headers"),
  body: z.string().optional().describe('The body as text, for text and JSON answers'),
  bodyBase64: z.string().optional().describe('The body in base64, for binary answers'),
  bodyBytes: z
    .number()
    .int()
    .describe('Size of the upstream body: the bytes received, or when the body was cut, its Content-Length if the upstream gave one'),
  truncated: z.boolean().describe('True when the body was cut at MCP_CALL_API_MAX_BODY_BYTES: the rest was not read, and the call keeps its charge'),
  cost: z.number().describe('Dollars charged for the call'),
  balance: z.number().nullable().describe('Balance in dollars after the charge'),
  chargeId: z.string().nullable(),
  requestId: z.string().describe("This call's request id: get_activity with requestId finds the call, with its outcome and any refund"),
});

type CallApiArgs = z.output<ReturnType<typeof callApiInput>>;

const invalid = (message: string, hint: string): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify({ status: 400, ok: false, code: 'validation_failed', error: message, hint }) }],
});

/**
 * The answer sink of call_api: keeps at most `maxBytes` of the body in memory, then stops reading,
 * which releases the upstream; the call is then settled like any served call (it keeps its charge).
 */
class BoundedSink implements AnswerSink {
  readonly closed = false;
  status = 0;
  headers: Record<string, string | string[]> = {};
  private readonly chunks: Buffer[] = [];
  kept = 0;
  received = 0;
  truncated = false;
  private body: Readable | null = null;

  constructor(private readonly maxBytes: number) {}

  deliver(status: number, headers: Record<string, string | string[]>, body: Readable | null, stopping: () => void): Promise<boolean> {
    this.status = status;
    this.headers = headers;
    if (!body) return Promise.resolve(true);
    this.body = body;
    return new Promise<boolean>((resolve) => {
      body.on('data', (chunk: Buffer) => {
        this.received += chunk.length;
        const room = this.maxBytes - this.kept;
        if (room > 0) {
          const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
          this.chunks.push(part);
          this.kept += part.length;
        }
        if (this.received > this.maxBytes && !this.truncated) {
          this.truncated = true;
          stopping();
          body.destroy();
          resolve(true);
        }
      });
      body.once('end', () => resolve(true));
      body.once('error', () => resolve(false));
      body.once('close', () => resolve(!this.truncated && body.readableEnded));
      body.resume();
    });
  }

  abort(): void {
    this.body?.destroy();
  }

  get bytes(): Buffer {
    return Buffer.concat(this.chunks, this.kept);
  }
}

function queryString(query: CallApiArgs['query']): string | null {
  if (!query) return null;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) for (const item of value) params.append(name, item);
    else params.append(name, String(value));
  }
  const text = params.toString();
  return text === '' ? null : text;
}

/** The upstream request call_api's arguments describe, or a tool error for arguments it refuses. */
function upstreamRequest(args: CallApiArgs): { path: string; headers: string[]; payload: string | undefined } | CallToolResult {
  let path = args.path.startsWith('/') ? args.path : `/${args.path}`;
  if (/[?#]/.test(path)) return invalid('path must not carry a query string or fragment', 'Put query parameters in the query argument.');
  if (path === '/') path = '';
  const headers: string[] = [];
  const named = new Set<string>();
  for (const [name, value] of Object.entries(args.headers ?? {})) {
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower))
      return invalid(
        `headers.${name} cannot be set through call_api`,
        lower === 'x-max-cost'
          ? 'Pass the price ceiling as the maxCost argument (dollars).'
          : 'Your platform key travels with the MCP request, and the proxy sets the transfer headers itself: leave this one out.',
      );
    headers.push(name, value);
    named.add(lower);
  }
  let payload: string | undefined;
  if (args.body !== undefined) {
    payload = typeof args.body === 'string' ? args.body : JSON.stringify(args.body);
    if (!named.has('content-type')) headers.push('content-type', typeof args.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json');
    headers.push('content-length', String(Buffer.byteLength(payload)));
  }
  return { path, headers, payload };
}

/** The tool's result: the upstream's answer as the sink kept it, and what the call cost. */
function toolOutput(sink: BoundedSink, receipt: ChargeReceipt, balanceMicros: bigint, requestId: string): CallToolResult {
  const upstreamHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(sink.headers)) {
    if (TRANSFER_HEADERS.test(name)) continue;
    upstreamHeaders[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  const kept = sink.bytes;
  const contentType = upstreamHeaders['content-type'] ?? '';
  const textual = TEXTUAL.test(contentType) || (contentType === '' && !kept.includes(0));
  const declared = Number(sink.headers['content-length'] ?? sink.headers['Content-Length'] ?? Number.NaN);
  const charge = { cost: toDollars(receipt.costMicros), balance: toDollars(balanceMicros), chargeId: receipt.chargeId };
  const output: z.output<typeof callApiOutput> = {
    status: sink.status,
    headers: upstreamHeaders,
    ...(textual ? { body: kept.toString('utf8') } : { bodyBase64: kept.toString('base64') }),
    bodyBytes: sink.truncated && Number.isSafeInteger(declared) ? declared : sink.received,
    truncated: sink.truncated,
    ...charge,
    requestId,
  };
  return { content: [{ type: 'text', text: JSON.stringify(output) }], structuredContent: output, _meta: { [CHARGE_META]: charge } };
}

/**
 * call_api: the MCP door of the metered call (core/gateway's MeteredCall), with the same price,
 * limits, checks, refunds and usage as the REST proxy; the answer is read up to `maxBodyBytes`.
 */
export async function callApi(
  app: FastifyInstance,
  caller: Caller,
  toolCaller: ToolCaller,
  args: CallApiArgs,
  maxBodyBytes: number,
): Promise<CallToolResult> {
  const request = upstreamRequest(args);
  if ('content' in request) return request;
  const sink = new BoundedSink(maxBodyBytes);
  try {
    const query = queryString(args.query);
    const target = proxyTarget(query === null ? request.path || '/' : `${request.path || '/'}?${query}`, 0);
    if (request.path === '') target.path = '';
    const maxCost = parseMaxCost(args.maxCost === undefined ? undefined : String(args.maxCost));
    // Counted like a call of the proxy route: against the key's and the account's budgets.
    await toolCaller.limit();
    const result = await app.meteredCall.run({
      caller,
      apiId: args.apiId,
      method: args.method,
      target,
      headers: request.headers,
      // Whole in memory: a call refused 401 for its OAuth token can be sent again with a renewed one.
      body: request.payload === undefined ? null : Buffer.from(request.payload),
      declaredLength: request.payload === undefined ? 0 : Buffer.byteLength(request.payload),
      charge: (call) => chargeCall(app.charges, caller, call, maxCost, app.usage, toolCaller.requestId),
      requestId: toolCaller.requestId,
      sink,
      doorBase: '',
    });
    if (result.refunded)
      throw new PlatformError('upstream_error', `${args.apiId} closed the connection mid-answer`, {
        hint: 'The call was refunded.',
        details: { chargeId: result.receipt.chargeId },
      });
    return toolOutput(sink, result.receipt, result.receipt.balanceMicros ?? (await app.charges.balanceOf(caller.accountId)), toolCaller.requestId);
  } catch (error) {
    if (error instanceof PlatformError) return platformErrorResult(error);
    app.log.error({ err: error, apiId: args.apiId }, 'call_api failed');
    return platformErrorResult(
      new PlatformError('internal_error', 'Internal error', { hint: 'Retry the call; if it keeps failing, check get_usage for its outcome.' }),
    );
  }
}
