import type { FastifyInstance } from 'fastify';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { apiId as API_ID } from '#contracts/directory';
import { callRoute, CHARGE_META, chargeOf, errorResult, type RouteAnswer, type ToolCaller } from './dispatch.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Headers a tool call may not set: the caller's credentials and the edge's own controls come from the MCP request and the tool's arguments. */
const RESERVED_HEADERS = new Set(['authorization', 'x-api-key', 'cookie', 'host', 'content-length', 'transfer-encoding', 'connection', 'x-max-cost', 'x-request-id', 'x-forwarded-for']);

/** The edge's own headers on a proxied answer, which the tool reports as cost and balance instead. */
const EDGE_HEADERS = /^(x-service-|x-ratelimit-|x-request-id$|content-security-policy$|x-content-type-options$|cross-origin-resource-policy$|content-length$|transfer-encoding$|connection$|keep-alive$|date$)/;

const TEXTUAL = /^(text\/|application\/(json|xml|javascript|ecmascript|x-www-form-urlencoded|graphql|yaml|x-yaml|[\w.+-]+\+(json|xml)))/i;

/** The arguments of call_api; an agent key with an allow-list sees only its APIs as choices. */
export function callApiInput(allowedApis: readonly string[] | null) {
  const apiId = allowedApis && allowedApis.length > 0 ? z.enum(allowedApis as [string, ...string[]]) : API_ID;
  return z.object({
    apiId: apiId.describe('The directory API id, e.g. from discover_apis'),
    method: z.enum(METHODS).default('GET'),
    path: z.string().max(4000).default('/').describe("The upstream path after the API's base URL, e.g. /v1/forecast (no query string: use query)"),
    query: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())])).optional().describe('Query parameters for the upstream'),
    headers: z.record(z.string(), z.string()).optional().describe('Extra request headers for the upstream (never your platform key: the MCP request carries it)'),
    body: z
      .union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .optional()
      .describe('Request body: text is sent as it is, an object or array as JSON'),
    maxCost: z.union([z.number(), z.string()]).optional().describe('Refuse the call (402) if it would cost more than this many dollars'),
  });
}

export const callApiOutput = z.object({
  status: z.number().int().describe("The upstream's HTTP status"),
  headers: z.record(z.string(), z.string()).describe("The upstream's response headers"),
  body: z.string().optional().describe('The body as text, for text and JSON answers'),
  bodyBase64: z.string().optional().describe('The body in base64, for binary answers'),
  bodyBytes: z.number().int().describe('Size of the whole upstream body'),
  truncated: z.boolean().describe('True when the body was cut at MCP_CALL_API_MAX_BODY_BYTES'),
  cost: z.number().describe('Dollars charged for the call'),
  balance: z.number().nullable().describe('Balance in dollars after the charge'),
  chargeId: z.string().nullable(),
});

type CallApiArgs = z.output<ReturnType<typeof callApiInput>>;

const invalid = (message: string, hint: string): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify({ status: 400, ok: false, code: 'validation_failed', error: message, hint }) }],
});

/**
 * Whether an answer of the proxy route is the platform's (a refusal before forwarding, or an
 * upstream failure that was refunded) rather than the upstream's own answer passed through.
 */
function isPlatformAnswer(answer: RouteAnswer): boolean {
  if (answer.headers['x-service-api'] === undefined || answer.headers['x-service-refund-id'] !== undefined) return true;
  if (answer.statusCode < 500) return false;
  try {
    const body = JSON.parse(answer.rawPayload.toString('utf8')) as { ok?: unknown; code?: unknown };
    return body.ok === false && typeof body.code === 'string' && body.code.startsWith('upstream');
  } catch {
    return false;
  }
}

/** call_api: one call through the metered proxy route, charged and recorded exactly as a direct proxy call is. */
export async function callApi(app: FastifyInstance, caller: ToolCaller, args: CallApiArgs, maxBodyBytes: number): Promise<CallToolResult> {
  let path = args.path.startsWith('/') ? args.path : `/${args.path}`;
  if (/[?#]/.test(path)) return invalid('path must not carry a query string or fragment', 'Put query parameters in the query argument.');
  if (path === '/') path = '';
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(args.headers ?? {})) {
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) return invalid(`headers.${name} cannot be set through call_api`, 'Your key travels with the MCP request; use maxCost for X-Max-Cost.');
    headers[lower] = value;
  }
  if (args.maxCost !== undefined) headers['x-max-cost'] = String(args.maxCost);
  let payload: string | undefined;
  if (args.body !== undefined) {
    if (typeof args.body === 'string') {
      payload = args.body;
      headers['content-type'] ??= 'text/plain; charset=utf-8';
    } else {
      payload = JSON.stringify(args.body);
      headers['content-type'] ??= 'application/json';
    }
  }
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(args.query ?? {})) query[name] = Array.isArray(value) ? value : String(value);

  const answer = await callRoute(app, caller, { method: args.method, url: `/api/v1/proxy/${encodeURIComponent(args.apiId)}${path}`, query, headers, payload });
  if (isPlatformAnswer(answer)) return errorResult(answer);

  const upstreamHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined || EDGE_HEADERS.test(name)) continue;
    upstreamHeaders[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  const whole = answer.rawPayload;
  const kept = whole.subarray(0, maxBodyBytes);
  const contentType = upstreamHeaders['content-type'] ?? '';
  const textual = TEXTUAL.test(contentType) || (contentType === '' && !kept.includes(0));
  const charge = chargeOf(answer) ?? { cost: 0, balance: null, chargeId: null };
  const output: z.output<typeof callApiOutput> = {
    status: answer.statusCode,
    headers: upstreamHeaders,
    ...(textual ? { body: kept.toString('utf8') } : { bodyBase64: kept.toString('base64') }),
    bodyBytes: whole.length,
    truncated: kept.length < whole.length,
    cost: charge.cost,
    balance: charge.balance,
    chargeId: charge.chargeId,
  };
  return { content: [{ type: 'text', text: JSON.stringify(output) }], structuredContent: output, _meta: { [CHARGE_META]: charge } };
}
