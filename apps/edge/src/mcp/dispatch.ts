import type { FastifyInstance } from 'fastify';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { PlatformError } from '#core/platform';
import { errorBody } from '../errors.js';
import { PREPAID_HEADER } from '../plugins/rate-limit.js';
import type { ArgShape, RouteTool } from './tools.js';

/** Who is calling, as the MCP request authenticated it; every tool call is made with these credentials. */
export interface ToolCaller {
  /** The key the client sent as its Bearer token; kept in memory for the calls it makes, never logged or returned. */
  key: string;
  /** The client's address as the edge resolved it (TRUST_PROXY applied), so per-address rules see the real client. */
  ip: string;
  /** The MCP request's id; each route call gets `<id>.<n>` so its log lines tie back to it. */
  requestId: string;
  /** Counts one call against the caller's rate limits, as a REST route would (throws 429 `rate_limited`); a prepaid one spends its pass instead. */
  limit(): Promise<void>;
  /** A pass from `rateLimiter.prepay` when the MCP request counted its tool calls already (a batch). */
  prepaid?: string;
}

/** The `_meta` key under which a priced tool's answer names what it cost. */
export const CHARGE_META = 'agent-api-platform/charge';

export interface RouteCall {
  method: string;
  url: string;
  query: Record<string, string | string[]>;
  headers: Record<string, string>;
  payload?: string | Buffer;
}

export interface RouteAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  rawPayload: Buffer;
}

/** The fields of the route's zod object schema (params, query or body), or none. */
export function fieldsOf(schema: z.ZodType | undefined): ArgShape {
  if (!schema) return {};
  let inner: z.ZodType = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType;
  return inner instanceof z.ZodObject ? ({ ...inner.shape } as ArgShape) : {};
}

let sequence = 0;

/**
 * Makes one call of a REST route on this edge, as the tool's caller: the same hooks run as for any
 * HTTP client (authentication, rate limits, validation, charging, usage), in-process.
 */
export async function callRoute(app: FastifyInstance, caller: ToolCaller, call: RouteCall): Promise<RouteAnswer> {
  sequence = (sequence + 1) % 1_000_000;
  const response = await app.inject({
    method: call.method as 'GET',
    url: call.url,
    query: call.query,
    payload: call.payload,
    remoteAddress: caller.ip,
    headers: {
      ...call.headers,
      authorization: `Bearer ${caller.key}`,
      'x-request-id': `${caller.requestId}.${sequence}`.slice(0, 128),
      ...(caller.prepaid === undefined ? {} : { [PREPAID_HEADER]: caller.prepaid }),
    },
  });
  return { statusCode: response.statusCode, headers: response.headers, rawPayload: response.rawPayload };
}

/** Builds the route call for a route tool's arguments: each goes where the route's schemas declare it. */
export function routeCallFor(tool: RouteTool, route: { params?: z.ZodType; querystring?: z.ZodType; body?: z.ZodType }, args: Record<string, unknown>): RouteCall {
  const params = fieldsOf(route.params);
  const body = fieldsOf(route.body);
  let url = tool.url;
  const query: Record<string, string | string[]> = {};
  const payload: Record<string, unknown> = {};
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(args)) {
    if (value === undefined) continue;
    if (name === 'maxCost') headers['x-max-cost'] = String(value);
    else if (tool.headerArgs?.[name]) headers[tool.headerArgs[name].header] = String(value);
    else if (name in params) url = url.replace(`:${name}`, encodeURIComponent(String(value)));
    else if (name in body) payload[name] = value;
    else query[name] = Array.isArray(value) ? value.map(String) : String(value);
  }
  const call: RouteCall = { method: tool.method, url, query, headers };
  if (tool.method !== 'GET') {
    call.payload = JSON.stringify(payload);
    headers['content-type'] = 'application/json';
  }
  return call;
}

function parseJson(buffer: Buffer): unknown {
  try {
    return JSON.parse(buffer.toString('utf8'));
  } catch {
    return undefined;
  }
}

const header = (answer: RouteAnswer, name: string): string | undefined => {
  const value = answer.headers[name];
  return value === undefined ? undefined : String(Array.isArray(value) ? value[0] : value);
};

/** What a charged answer's X-Service-* headers say it cost: dollars as numbers, as the JSON bodies give them. */
export function chargeOf(answer: RouteAnswer): { cost: number; balance: number | null; chargeId: string | null } | null {
  const cost = header(answer, 'x-service-cost');
  if (cost === undefined) return null;
  const balance = header(answer, 'x-service-balance');
  return { cost: Number(cost), balance: balance === undefined ? null : Number(balance), chargeId: header(answer, 'x-service-charge-id') ?? null };
}

/**
 * A refused call as an MCP tool error: the platform's error body (`code`, `error`, `hint`, and for
 * a 402 `balance` and `cost`) with the HTTP status and, when limited, the seconds to wait.
 */
export function errorResult(answer: RouteAnswer): CallToolResult {
  const body = parseJson(answer.rawPayload);
  const error =
    body && typeof body === 'object' && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : { ok: false, code: 'internal_error', error: answer.rawPayload.toString('utf8').slice(0, 500) };
  const retryAfter = header(answer, 'retry-after');
  const detail = { status: answer.statusCode, ...error, ...(retryAfter === undefined ? {} : { retryAfter: Number(retryAfter) }) };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(detail) }] };
}

/** A PlatformError as an MCP tool error, in the same shape as `errorResult` gives a route's refusal. */
export function platformErrorResult(error: PlatformError): CallToolResult {
  const retryAfter = error.headers?.['Retry-After'];
  const detail = { status: error.status, ...errorBody(error), ...(retryAfter === undefined ? {} : { retryAfter: Number(retryAfter) }) };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(detail) }] };
}

/** A route's answer as the tool's result: the JSON body is the structured content, and the text says the same (with the charge). */
export function routeResult(answer: RouteAnswer): CallToolResult {
  if (answer.statusCode >= 400) return errorResult(answer);
  const body = parseJson(answer.rawPayload) as Record<string, unknown>;
  const charge = chargeOf(answer);
  return {
    content: [{ type: 'text', text: JSON.stringify(charge ? { ...body, charge } : body) }],
    structuredContent: body,
    ...(charge ? { _meta: { [CHARGE_META]: charge } } : {}),
  };
}
