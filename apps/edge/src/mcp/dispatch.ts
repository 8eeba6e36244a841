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
import type { ArgShape, RouteTool } from './tools.js';
import { toolWording } from './wording.js';

/** Who is calling, as the MCP request authenticated it; every tool call is made with these credentials. */
export interface ToolCaller {
  /** The MCP request's id, which a failed tool's log line names. */
  requestId: string;
  /** Counts one call against the caller's rate limits, as a REST route would (throws 429 `rate_limited`); a prepaid one spends its pass instead. */
  limit(): Promise<void>;
  /** A pass from `rateLimiter.prepay` when the MCP request counted its tool calls already (a batch). */
  prepaid?: string;
}

/** The maxCost argument of every tool that spends money (call_api and the priced route tools). */
export const MAX_COST = z
  .union([z.number(), z.string()])
  .optional()
  .describe(
    'The most you accept to pay for this call, in dollars (a number, or text such as "0.01"). A higher price is refused with a 409 max_cost_exceeded tool error and nothing is charged; leave it out to accept the price.',
  );

/** The `_meta` key under which a priced tool's answer names what it cost. */
export const CHARGE_META = 'agent-api-platform/charge';

/** The fields of the route's zod object schema (params, query or body), or none. */
export function fieldsOf(schema: z.ZodType | undefined): ArgShape {
  if (!schema) return {};
  let inner: z.ZodType = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType;
  return inner instanceof z.ZodObject ? ({ ...inner.shape } as ArgShape) : {};
}

/**
 * A refused call as an MCP tool error: the platform's error body (`code`, `error`, `hint`, and for
 * a 402 `balance` and `cost`) with the HTTP status and, when limited, the seconds to wait; `error`
 * and `hint` name tools and arguments rather than routes and headers.
 */
export function platformErrorResult(error: PlatformError): CallToolResult {
  const retryAfter = error.headers?.['Retry-After'];
  // Worded for a tool caller: tools and their arguments, not routes and headers (mcp/wording.ts).
  const { error: message, hint } = toolWording(error);
  const { hint: _restHint, ...body } = errorBody(error);
  const detail = {
    status: error.status,
    ...body,
    error: message,
    ...(hint === undefined ? {} : { hint }),
    ...(retryAfter === undefined ? {} : { retryAfter: Number(retryAfter) }),
  };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(detail) }] };
}

/** A charge as a tool result states it: dollars, with the balance and charge id of a charge that debited the balance. */
function chargeOfReceipt(receipt: ChargeReceipt): { cost: number; balance: number | null; chargeId: string | null } {
  const debited = receipt.chargeId !== null && receipt.balanceMicros !== null;
  return {
    cost: toDollars(receipt.costMicros),
    balance: debited ? toDollars(receipt.balanceMicros!) : null,
    chargeId: debited ? receipt.chargeId : null,
  };
}

const invalidArguments = (issues: z.core.$ZodIssue[]) =>
  new PlatformError(
    'validation_failed',
    `Invalid arguments: ${issues
      .slice(0, 5)
      .map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`)
      .join('; ')}`,
    {
      hint: "See the tool's inputSchema.",
    },
  );

/**
 * A tool's arguments as the operation's input: checked against the tool's input schema (`shape`,
 * which may require what the route leaves optional), then each part against the route's own
 * schema, so an error names the argument, not where a REST client would have put it.
 */
function inputOf<S extends OperationSchemas>(
  shape: ArgShape,
  schemas: S,
  args: Record<string, unknown>,
  headerArgs: RouteTool['headerArgs'] = {},
): OperationInput<S> {
  // Postgres text holds neither NUL nor a lone surrogate: refused here as the edge refuses them in a request.
  const unstorable = findUnstorableText(args);
  if (unstorable) {
    const what = unstorable.problem === 'nul' ? 'the NUL character (\\u0000)' : 'a lone UTF-16 surrogate (\\uD800-\\uDFFF without its pair)';
    throw new PlatformError('validation_failed', `Invalid arguments: ${unstorable.where} contains ${what}, which text cannot hold`, {
      hint: `Remove or replace it in ${unstorable.where}.`,
    });
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
  if (schemas.headers) {
    // A header argument goes in under its header's name; an error names the argument, not the header.
    const argOf = new Map(Object.entries(headerArgs).map(([name, arg]) => [arg.header, name]));
    const values = Object.fromEntries(
      Object.entries(headerArgs).flatMap(([name, arg]) => (checked.data[name] === undefined ? [] : [[arg.header, checked.data[name]]])),
    );
    const parsed = schemas.headers.safeParse(values);
    if (!parsed.success)
      throw invalidArguments(parsed.error.issues.map((issue) => ({ ...issue, path: issue.path.map((key) => argOf.get(String(key)) ?? key) })));
    input.headers = parsed.data;
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
  tool: { name: string; shape: ArgShape; operation: Operation; output?: z.ZodType; headerArgs?: RouteTool['headerArgs'] },
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  try {
    await toolCaller.limit();
    const input = inputOf(tool.shape, tool.operation.schemas, args, tool.headerArgs);
    const maxCost = parseMaxCost(args.maxCost === undefined ? undefined : String(args.maxCost));
    let receipt: ChargeReceipt | null = null;
    const door: Door = {
      caller,
      callerIfAny: caller,
      via: 'mcp',
      charge: async (call) => (receipt = await chargeCall(app.charges, caller, call, maxCost, app.usage, toolCaller.requestId)),
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
    return platformErrorResult(
      new PlatformError('internal_error', 'Internal error', { hint: 'Retry the call; if it keeps failing, report the time of the call.' }),
    );
  }
}
