import type { FastifyInstance } from 'fastify';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { toDollars } from '#contracts/money';
import { chargeCall, parseMaxCost, type ChargeReceipt } from '#core/billing';
import type { Caller } from '#core/identity';
import { PlatformError } from '#core/platform';
import { errorBody } from '../errors.js';
import type { Door, Operation, OperationInput, OperationSchemas } from '../http/operation.js';
import { findUnstorableText } from '../http/json-body.js';
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

/** A charge as a tool result states it: dollars, with the balance and charge id of a charge that debited the balance. */
function chargeOfReceipt(receipt: ChargeReceipt): { cost: number; balance: number | null; chargeId: string | null } {
  const debited = receipt.chargeId !== null && receipt.balanceMicros !== null;
  return { cost: toDollars(receipt.costMicros), balance: debited ? toDollars(receipt.balanceMicros!) : null, chargeId: debited ? receipt.chargeId : null };
}

const invalidArguments = (issues: z.core.$ZodIssue[]) =>
  new PlatformError('validation_failed', `Invalid arguments: ${issues.slice(0, 5).map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`).join('; ')}`, {
    hint: "See the tool's inputSchema.",
  });

/**
 * A tool's arguments as the operation's input: checked against the tool's input schema (`shape`,
 * which may require what the route leaves optional), then each part against the route's own
 * schema, so an error names the argument, not where a REST client would have put it.
 */
function inputOf<S extends OperationSchemas>(shape: ArgShape, schemas: S, args: Record<string, unknown>): OperationInput<S> {
  // Postgres text holds neither NUL nor a lone surrogate: refused here as the edge refuses them in a request.
  const unstorable = findUnstorableText(args);
  if (unstorable) {
    const what = unstorable.problem === 'nul' ? 'the NUL character (\\u0000)' : 'a lone UTF-16 surrogate (\\uD800-\\uDFFF without its pair)';
    throw new PlatformError('validation_failed', `Invalid arguments: ${unstorable.where} contains ${what}, which text cannot hold`, { hint: `Remove or replace it in ${unstorable.where}.` });
  }
  const checked = z.object(shape).safeParse(args);
  if (!checked.success) throw invalidArguments(checked.error.issues);
  const parts = { params: schemas.params, query: schemas.querystring, body: schemas.body };
  const input: Record<string, unknown> = {};
  for (const [part, schema] of Object.entries(parts)) {
    if (!schema) continue;
    const fields = Object.keys(fieldsOf(schema));
    const values = Object.fromEntries(Object.entries(checked.data).filter(([name]) => fields.includes(name)));
    const parsed = schema.safeParse(values);
    if (!parsed.success) throw invalidArguments(parsed.error.issues);
    input[part] = parsed.data;
  }
  return input as unknown as OperationInput<S>;
}

/**
 * Runs a route tool's operation in-process, as its route would: counted against the caller's rate
 * limits, arguments validated with the route's schemas, a priced item charged with the tool's
 * maxCost. The answer is the route's body (through its response schema), the charge in `_meta`.
 */
export async function runOperation(
  app: FastifyInstance,
  caller: Caller,
  toolCaller: ToolCaller,
  tool: { name: string; shape: ArgShape; operation: Operation; output?: z.ZodType },
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  try {
    await toolCaller.limit();
    const input = inputOf(tool.shape, tool.operation.schemas, args);
    const maxCost = parseMaxCost(args.maxCost === undefined ? undefined : String(args.maxCost));
    let receipt: ChargeReceipt | null = null;
    const door: Door = {
      caller,
      charge: async (call) => (receipt = await chargeCall(app.charges, caller, call, maxCost, app.usage)),
    };
    const answer = await tool.operation.run(app, door, input);
    const body = (tool.output ? tool.output.parse(answer) : answer) as Record<string, unknown>;
    const charge = receipt === null ? null : chargeOfReceipt(receipt);
    return {
      content: [{ type: 'text', text: JSON.stringify(charge ? { ...body, charge } : body) }],
      structuredContent: body,
      ...(charge ? { _meta: { [CHARGE_META]: charge } } : {}),
    };
  } catch (error) {
    if (error instanceof PlatformError) return platformErrorResult(error);
    app.log.error({ err: error, tool: tool.name, requestId: toolCaller.requestId }, 'MCP tool failed');
    return platformErrorResult(new PlatformError('internal_error', 'Internal error', { hint: 'Retry the call; if it keeps failing, report the time of the call.' }));
  }
}
