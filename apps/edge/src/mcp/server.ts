import type { FastifyInstance } from 'fastify';
import { McpServer, type StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Caller } from '#core/identity';
import { callApi, callApiInput, callApiOutput } from './call-api.js';
import { fieldsOf, MAX_COST, runOperation, type ToolCaller } from './dispatch.js';
import { ROUTE_TOOLS, type ArgShape } from './tools.js';

export const SERVER_INFO = { name: 'agent-api-platform', title: 'Agent API Platform', version: '0.1.0' };

/**
 * The tool sets a client may ask for when it connects (`/mcp?profile=calls`; docs/decisions/mcp-tool-profiles.md):
 * `full`, every tool; `calls`, only what an agent that calls APIs needs (find one, read its
 * details and prices, call it, see the balance, ask a person for a connection).
 */
export const MCP_PROFILES = ['full', 'calls'] as const;
export type McpProfile = (typeof MCP_PROFILES)[number];
const CALLS_PROFILE = new Set(['discover_apis', 'search_apis', 'get_api', 'call_api', 'get_balance', 'request_connection', 'get_connection_request']);
const inProfile = (profile: McpProfile, tool: string) => profile === 'full' || CALLS_PROFILE.has(tool);

const SHARED_INSTRUCTIONS = [
  'Each API says whether you can call it now (callability.state: ready; needs_key or needs_oauth, which a person connects; unavailable): pass callable: true to find only the ready ones, and follow callability.hint for the others.',
  "Prices are per call: an API's pricePerCall, unless one of its priceRules (per method and path) matches. Tools that spend money say so and take maxCost (dollars): a higher price is refused (409 max_cost_exceeded) and nothing is charged.",
  'When an API needs a connection you cannot make (connection_required), ask a person with request_connection (say what you want to do and why), then wait with get_connection_request until it is connected.',
];
const INSTRUCTIONS: Record<McpProfile, string> = {
  full: [
    'A directory of about 2,600 third-party APIs with a metered proxy, and cookbooks: multi-step procedures run as sessions, some steps done by a person.',
    'Find an API with discover_apis (describe the task) or search_apis, read how to call it with get_api_instructions, then call it with call_api: each call is charged to the prepaid balance (get_balance).',
    ...SHARED_INSTRUCTIONS,
    'For a cookbook: get_cookbook, start_cookbook, then get_current_step and complete_step until a human step (done by a person in the dashboard) or the end; follow progress with get_session_events.',
  ].join(' '),
  calls: [
    'A directory of about 2,600 third-party APIs with a metered proxy (this connection has the lean tool set: connect to /mcp without ?profile=calls for cookbooks, docs and usage).',
    'Find an API with discover_apis (describe the task) or search_apis, read its endpoints, auth and prices with get_api, then call it with call_api: each call is charged to the prepaid balance (get_balance).',
    ...SHARED_INSTRUCTIONS,
  ].join(' '),
};

/** The price tag on a tool's definition (`_meta`), for clients that show it before calling. */
const PRICE_META = 'agent-api-platform/price';

/**
 * Advertises a route's zod schema as the tool's input schema but leaves validating to the tool's
 * call (runOperation): a bad argument then gets
 * a `validation_failed` tool error naming it, with a hint, rather than the SDK's own error.
 */
function describedOnly(schema: z.ZodType): StandardSchemaWithJSON {
  const standard = (schema as unknown as StandardSchemaWithJSON)['~standard'];
  return {
    '~standard': {
      version: 1,
      vendor: standard.vendor,
      validate: (value: unknown) => ({ value: value ?? {} }),
      jsonSchema: standard.jsonSchema,
    },
  } as StandardSchemaWithJSON;
}

const spends = (price: string) =>
  ` Spends money: ${price} per call, charged to the prepaid balance; pass maxCost (dollars) to refuse a higher price (409 max_cost_exceeded, nothing charged).`;

/** A route tool as every MCP request registers it: its arguments, schemas and definition, built once per app. */
interface PreparedTool {
  /** Account-only routes are left out for agent keys. */
  accountOnly: boolean;
  /** What runOperation needs to run the tool. */
  run: Parameters<typeof runOperation>[3];
  config: {
    title: string;
    description: string;
    inputSchema: StandardSchemaWithJSON;
    outputSchema?: StandardSchemaWithJSON;
    annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
    _meta?: Record<string, string>;
  };
}

/**
 * The route tools' definitions depend on the app's routes only, not on the caller: building their zod
 * objects for every MCP request (the transport is stateless, so every request builds a server) took
 * 520-790 µs of CPU per request for the full profile, 140-200 µs with them prepared. Built on first use.
 */
const preparedTools = new WeakMap<FastifyInstance, PreparedTool[]>();

function prepareTools(app: FastifyInstance): PreparedTool[] {
  const known = preparedTools.get(app);
  if (known) return known;
  const prepared = ROUTE_TOOLS.map((tool): PreparedTool => {
    const route = app.routeCatalog.get(`${tool.method} ${tool.url}`);
    if (!route) throw new Error(`MCP tool ${tool.name}: no route ${tool.method} ${tool.url}`);
    let shape: ArgShape = { ...fieldsOf(route.params), ...fieldsOf(route.querystring), ...fieldsOf(route.body) };
    if (tool.shape) shape = tool.shape(shape);
    for (const [name, arg] of Object.entries(tool.headerArgs ?? {})) shape[name] = arg.schema;
    if (tool.price) shape.maxCost = MAX_COST;
    const output = route.response?.['200'] ?? route.response?.['201'];
    const config = {
      title: tool.title,
      description: tool.description + (tool.price ? spends(tool.price) : ''),
      inputSchema: describedOnly(z.object(shape)),
      ...(output ? { outputSchema: output as unknown as StandardSchemaWithJSON } : {}),
      // A priced read is not read-only: it debits the balance. That is how the annotations say "spends money".
      annotations: {
        title: tool.title,
        readOnlyHint: tool.readOnly && !tool.price,
        destructiveHint: false,
        idempotentHint: tool.readOnly && !tool.price,
        openWorldHint: false,
      },
      ...(tool.price ? { _meta: { [PRICE_META]: tool.price } } : {}),
    };
    return {
      accountOnly: route.auth === 'account',
      run: { name: tool.name, shape, operation: tool.operation, output, headerArgs: tool.headerArgs },
      config,
    };
  });
  preparedTools.set(app, prepared);
  return prepared;
}

/** call_api's arguments for a key without an allow-list, built once (an allow-list names its own APIs). */
let openCallApiInput: ReturnType<typeof callApiInput> | undefined;

/**
 * One MCP server for one request (the transport is stateless), holding the tools this caller may
 * use in the profile it connected with: an agent key does not see tools whose route it may not
 * call, and sees call_api only for the APIs its allow-list names (not at all when the list is empty).
 */
export function buildMcpServer(app: FastifyInstance, caller: Caller, toolCaller: ToolCaller, profile: McpProfile = 'full'): McpServer {
  const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS[profile] });
  for (const { accountOnly, run, config } of prepareTools(app)) {
    if (!inProfile(profile, run.name)) continue;
    if (accountOnly && caller.keyKind === 'agent') continue;
    server.registerTool(run.name, config, async (args: unknown) =>
      runOperation(app, caller, toolCaller, run, (args ?? {}) as Record<string, unknown>),
    );
  }

  if (caller.allowedApis === null || caller.allowedApis.length > 0) {
    // call_api is in every profile.
    const input = caller.allowedApis === null ? (openCallApiInput ??= callApiInput(null)) : callApiInput(caller.allowedApis);
    server.registerTool(
      'call_api',
      {
        title: 'Call an API through the metered proxy',
        description:
          "Calls a directory API through the platform's metered proxy: method, path after the API's base URL, query, headers and body reach the upstream; the answer carries its status, headers (the upstream's own rate limits and request id as x-upstream-ratelimit-* and x-upstream-request-id) and body, and what the call cost. Spends money: the API's price per call, or the price of its priceRules entry matching the method and path (get_api shows both), charged before the call is forwarded; failed upstream calls (502/503) are refunded. Pass maxCost (dollars) to refuse a higher price (409 max_cost_exceeded, nothing charged)." +
          (caller.allowedApis ? ` This key may call: ${caller.allowedApis.join(', ')}.` : ''),
        inputSchema: describedOnly(input),
        outputSchema: callApiOutput as unknown as StandardSchemaWithJSON,
        annotations: { title: 'Call an API', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
        _meta: { [PRICE_META]: "the API's price per call" },
      },
      async (args: unknown) => {
        const parsed = input.safeParse(args ?? {});
        if (!parsed.success) {
          const issues = parsed.error.issues.slice(0, 5).map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`);
          return {
            isError: true,
            content: [
              {
                type: 'text',
                text: JSON.stringify({
                  status: 400,
                  ok: false,
                  code: 'validation_failed',
                  error: `Invalid arguments: ${issues.join('; ')}`,
                  hint: "See the tool's inputSchema.",
                }),
              },
            ],
          };
        }
        return callApi(app, caller, toolCaller, parsed.data, app.deps.settings.MCP_CALL_API_MAX_BODY_BYTES);
      },
    );
  }
  return server;
}
