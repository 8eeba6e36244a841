import { z } from 'zod';
import { formatDollars, PRICES } from '#contracts/money';
import type { Operation } from '../http/operation.js';
import { readBalance } from '../routes/balance.js';
import { getDocSection, listDocSections, searchDocSections } from '../routes/docs.js';
import {
  completeStepOperation,
  getCookbookOperation,
  getCurrentStepOperation,
  getSessionEventsOperation,
  getSessionOperation,
  listCookbooksOperation,
  listSessionsOperation,
  startCookbookOperation,
} from '../routes/cookbooks.js';
import { discoverApis, readApi, readApiInstructions, searchApis } from '../routes/directory.js';
import { readUsage } from '../routes/usage.js';
import { getConnectRequestOperation, listConnectRequestsOperation, requestConnectionOperation } from '../routes/connect-requests.js';
import { readActivityOperation } from '../routes/activity.js';

/**
 * The MCP tools that are one REST route each. A tool names its route; its arguments are the route's
 * own params, query and body fields (the zod schemas the route validates with, read from the route
 * catalog), and its output schema is the route's success answer. Calling the tool runs the route's
 * operation, so prices, limits, the ledger and usage are the route's, with no second implementation.
 */
/** A tool's arguments: name to zod schema. */
export type ArgShape = Record<string, z.ZodType>;

export interface RouteTool {
  name: string;
  title: string;
  description: string;
  method: 'GET' | 'POST';
  /** The route as registered, e.g. `/api/v1/apis/:id`. */
  url: string;
  /** What a call costs, when the route charges: the tool then takes `maxCost` and says it spends money. */
  price?: string;
  /** Only reads (no session started, nothing completed); a priced read still spends money, so its tool is not marked read-only. */
  readOnly: boolean;
  /** Adjusts the arguments taken from the route's schemas: an optional query field the tool requires, an alias dropped. */
  shape?: (shape: ArgShape) => ArgShape;
  /** Arguments sent as request headers rather than params, query or body fields. */
  headerArgs?: Record<string, { header: string; schema: z.ZodType }>;
  /**
   * What the tool runs: the route's own operation, called in-process with the route's schemas,
   * limits and prices (mcp/dispatch.ts runOperation).
   */
  operation: Operation;
}

/** An optional field made required (a tool can demand what a route answers with a 400 without). */
function required(schema: z.ZodType | undefined, what: string): z.ZodType {
  if (!schema) throw new Error(`route schema has no field ${what}`);
  return schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema;
}

const cents = (micros: bigint) => `$${formatDollars(micros)}`;

export const ROUTE_TOOLS: RouteTool[] = [
  {
    name: 'discover_apis',
    title: 'Discover APIs for a task',
    description:
      'Describe a task in plain words ("send a text message", "geocode an address") and get the directory APIs that can do it, best first, each with why it matched, the operations that do it (operations: method, path, summary and the price of a call on that path), whether you can call it now (api.callability: ready, needs_key, needs_oauth or unavailable, with a hint on what it takes) and its price (pricePerCall, and priceRules when some paths cost otherwise). Pass callable: true for only the ones you can call now. Free.',
    method: 'GET',
    url: '/api/v1/discover',
    readOnly: true,
    operation: discoverApis,
    shape: ({ query, limit, callable }) => ({
      query: required(query, 'query').describe('The task, in plain words'),
      limit: limit!,
      callable: callable!,
    }),
  },
  {
    name: 'search_apis',
    title: 'Search the API directory',
    description:
      'Keyword search over about 2,600 APIs (name, provider, description), optionally within one category; without q, lists APIs (sort: name, price, votes or popular; default featured first). Each API carries callability (ready, needs_key, needs_oauth or unavailable, with a hint); callable: true lists only the ones you can call now. Free.',
    method: 'GET',
    url: '/api/v1/apis',
    readOnly: true,
    operation: searchApis,
  },
  {
    name: 'get_api',
    title: 'API details',
    description:
      "One API's details: auth scheme, whether you can call it now and what it takes if not (callability: state, reason, hint, keyDocsUrl), endpoints, price per call and per-path prices (priceRules: a call matching a rule's method and path costs the rule's price instead), the proxy path and, for catalog APIs, the upstream base URL. Free.",
    method: 'GET',
    url: '/api/v1/apis/:id',
    readOnly: true,
    operation: readApi,
  },
  {
    name: 'get_api_instructions',
    title: 'Instructions for calling an API',
    description: `Agent-readable instructions (markdown) for one API: how to call it through the metered proxy, with examples. Costs ${cents(PRICES.instructions)} per read; an unknown API costs nothing.`,
    method: 'GET',
    url: '/api/v1/apis/:id/instructions',
    price: cents(PRICES.instructions),
    readOnly: true,
    operation: readApiInstructions,
  },
  {
    name: 'get_balance',
    title: 'Prepaid balance',
    description: "The account's prepaid balance in dollars. Free.",
    method: 'GET',
    url: '/api/v1/balance',
    readOnly: true,
    operation: readBalance,
  },
  {
    name: 'get_usage',
    title: 'Usage summary',
    description: 'Metered calls, cost and errors per day and per API over the last `days` days. Free; it may lag the ledger by seconds.',
    method: 'GET',
    url: '/api/v1/usage',
    readOnly: true,
    operation: readUsage,
  },
  {
    name: 'request_connection',
    title: 'Ask a person to connect an API',
    description:
      "When an API needs a connection you cannot make (call_api answers connection_required, or the API needs the account's own key or an OAuth grant), ask a person to connect it. Say in purpose what you want to do with the API and why: the person reads it in the dashboard's inbox and by e-mail before connecting. scopes (OAuth APIs only) are the API's declared scopes you need. waitSeconds (up to 60) waits for the answer; otherwise poll get_connection_request. The answer's request.next says what to do next. An identical pending request is answered instead of a new one. Free.",
    method: 'POST',
    url: '/api/v1/connect/:apiId/request',
    readOnly: false,
    shape: ({ wait: _alias, ...shape }) => shape,
    operation: requestConnectionOperation,
  },
  {
    name: 'get_connection_request',
    title: 'Outcome of a connection request',
    description:
      'A connection request as it stands: pending until a person connects the API (connected) or declines it; cancelled or expired otherwise. waitSeconds (up to 60) waits for a pending one to be answered. Call the API only once status is connected; request.next says what to do. Free.',
    method: 'GET',
    url: '/api/v1/connect/requests/:requestId',
    readOnly: true,
    shape: ({ wait: _alias, ...shape }) => shape,
    operation: getConnectRequestOperation,
  },
  {
    name: 'list_connection_requests',
    title: 'Connection requests',
    description: "The connection requests this key made (all of the account's for an account key), pending first. Free.",
    method: 'GET',
    url: '/api/v1/connect/requests',
    readOnly: true,
    operation: listConnectRequestsOperation,
  },
  {
    name: 'get_activity',
    title: 'Activity of metered calls',
    description:
      'Your metered calls, newest first: what each cost, whether it was served, failed or refunded, its status, error code and a hint. ' +
      'Filter by api, key, outcome (served, failed, refunded), status (404 or 4xx), time (since, until) and requestId (call_api returns it); page with cursor. ' +
      'An agent key sees its own calls. Free; a call shows a second or so after it ended.',
    method: 'GET',
    url: '/api/v1/activity',
    readOnly: true,
    operation: readActivityOperation,
  },
  {
    name: 'list_cookbooks',
    title: 'List cookbooks',
    description: 'Cookbooks are multi-step procedures (some steps wait for a person). Filter by free text and category. Free.',
    method: 'GET',
    url: '/api/v1/cookbooks',
    readOnly: true,
    operation: listCookbooksOperation,
  },
  {
    name: 'get_cookbook',
    title: 'Cookbook details',
    description: `A cookbook's steps and the API slots a session needs filled. Costs ${cents(PRICES.cookbookDetails)}.`,
    method: 'GET',
    url: '/api/v1/cookbooks/:id',
    price: cents(PRICES.cookbookDetails),
    readOnly: true,
    operation: getCookbookOperation,
  },
  {
    name: 'start_cookbook',
    title: 'Start a cookbook session',
    description:
      'Starts a session of the cookbook; selectedApis maps each slot name (from get_cookbook) to a directory API id. Send an idempotencyKey to make a retry answer the same session. Free to start; the calls its steps make are charged as usual.',
    method: 'POST',
    url: '/api/v1/cookbooks/:id/start',
    readOnly: false,
    headerArgs: {
      idempotencyKey: {
        header: 'idempotency-key',
        schema: z.string().min(1).max(200).optional().describe('Any unique text; a retry with the same key answers the same session'),
      },
    },
    operation: startCookbookOperation,
  },
  {
    name: 'list_sessions',
    title: 'Active cookbook sessions',
    description: "The account's sessions that are running or waiting for a person. Free.",
    method: 'GET',
    url: '/api/v1/cookbooks/sessions',
    readOnly: true,
    operation: listSessionsOperation,
  },
  {
    name: 'get_session',
    title: 'Cookbook session',
    description: 'A session with its status, progress and step history. Free.',
    method: 'GET',
    url: '/api/v1/cookbooks/sessions/:sessionId',
    readOnly: true,
    operation: getSessionOperation,
  },
  {
    name: 'get_current_step',
    title: 'Current step of a session',
    description: "The session's current step: its instructions (naming the chosen APIs) and the inputSchema its resultData must match. Free.",
    method: 'GET',
    url: '/api/v1/cookbooks/sessions/:sessionId/step',
    readOnly: true,
    operation: getCurrentStepOperation,
  },
  {
    name: 'complete_step',
    title: 'Complete the current step',
    description:
      "Completes the session's current agent step with resultData matching its inputSchema; answers the next step. A human step is completed by a person in the dashboard, not by an agent. A retry of a completion that already happened answers the same result.",
    method: 'POST',
    url: '/api/v1/cookbooks/sessions/:sessionId/complete-step',
    readOnly: false,
    operation: completeStepOperation,
  },
  {
    name: 'get_session_events',
    title: 'Session events since an id',
    description:
      "The session's events (step.started, human_step.pending, session.completed, ...) after afterEventId, oldest first. Poll with the answer's lastEventId; ended: true means nothing more will come. Free.",
    method: 'GET',
    url: '/api/v1/cookbooks/sessions/:sessionId/event-log',
    readOnly: true,
    operation: getSessionEventsOperation,
  },
  {
    name: 'list_docs',
    title: 'List documentation sections',
    description: 'The platform documentation sections with their price. Free.',
    method: 'GET',
    url: '/api/v1/docs',
    readOnly: true,
    operation: listDocSections,
  },
  {
    name: 'search_docs',
    title: 'Search the documentation',
    description: 'Full-text search over the documentation; answers titles with snippets. Free.',
    method: 'GET',
    url: '/api/v1/docs/search',
    readOnly: true,
    shape: ({ q }) => ({ q: required(q, 'q').describe('A word or two, e.g. "rate limits"') }),
    operation: searchDocSections,
  },
  {
    name: 'get_doc',
    title: 'Read a documentation section',
    description: `One documentation section in full. Costs its listed price (${cents(PRICES.docSection)} unless the section is free; list_docs shows each).`,
    method: 'GET',
    url: '/api/v1/docs/:slug',
    price: `${cents(PRICES.docSection)} (unless free)`,
    readOnly: true,
    operation: getDocSection,
  },
];
