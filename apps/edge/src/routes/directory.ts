import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  apiPageAnswer,
  BROWSE_SORTS,
  callabilityInstructions,
  categoryExists,
  categoryName,
  getApi,
  listApis,
  listedApiIds,
  listCategories,
  loadCallerAccess,
  mcpInstructions,
  modelDirSetting,
  NO_ACCESS,
  priceRulesOf,
  pricingRulesOf,
  publishedBaseUrl,
  toApiSummary,
  type CallerAccess,
} from '#core/directory';
import { generateInstructions, instructionsFooter, proxyPath } from '#core/directory';
import { notFound, PlatformError } from '#core/platform';
import { noteDiscovery } from '#core/identity';
import { PRICES, toDollars } from '#contracts/money';
import { operation, restDoor } from '../http/operation.js';
import { cachedBytes, cachedJson } from '#core/platform';
import { apiDetail, apiId, apiSummary } from '#contracts/directory';
import type { Door } from '../http/operation.js';

const page = z.object({ ok: z.literal(true), apis: z.array(apiSummary), nextCursor: z.string().nullable(), hint: z.string().optional() });
const paging = {
  limit: z.coerce.number().int().min(1).max(200).default(50).describe('APIs per page (1 to 200, default 50)'),
  cursor: z.string().max(2000).optional().describe("The previous page's nextCursor, to read the next page"),
};
const sortParam = z
  .enum(BROWSE_SORTS)
  .optional()
  .describe(
    'Browse order (without q): name (A to Z), price (cheapest first), votes (most useful first), popular (most accounts calling it in the last 30 days, then most calls). Default: featured first, then by name. Keep the same sort while paging.',
  );

/**
 * The hot public read routes (search, discovery) render their answers to JSON bytes themselves
 * (#core/directory answers.ts, possibly in a ranking worker), so their zod response schemas document
 * them (OpenAPI) without re-checking every answer at run time: that check cost about as much as the
 * ranking itself under load (docs/BENCHMARKS.md).
 */
const plainJson = () => (data: unknown) => (typeof data === 'string' ? data : JSON.stringify(data));

/** Sends an answer already rendered to JSON bytes (matching the route's schema) as they are. */
const sendJsonBytes = (reply: FastifyReply, body: Buffer) => reply.type('application/json; charset=utf-8').send(body);

/** The Redis key of a cached directory answer, per edge settings (computed once per database). */
const cacheKeys = new Map<string, string>();
function cacheKey(settings: FastifyInstance['deps']['settings'], ...parts: (string | number | undefined)[]): string {
  // The database is part of the key: deployments (and test runs) sharing one Redis never mix answers.
  let database = cacheKeys.get(settings.DATABASE_URL);
  if (database === undefined) {
    database = createHash('sha256').update(settings.DATABASE_URL).digest('hex').slice(0, 12);
    cacheKeys.set(settings.DATABASE_URL, database);
  }
  return `${settings.REDIS_PREFIX}:directory-cache:${database}:${JSON.stringify(parts)}`;
}

/** callable=true: only the APIs the caller can call now. A boolean for MCP tools, the text for a query string. */
const callableParam = z
  .union([z.boolean(), z.enum(['true', 'false'])])
  .optional()
  .describe('true: only the APIs you can call now (callability.state "ready"); anonymous callers get the ones that need no account');
const isCallableOnly = (value: boolean | 'true' | 'false' | undefined) => value === true || value === 'true';

const searchQuery = z.object({
  q: z.string().optional().describe('Keywords to search names, providers and descriptions for; without it, the directory is listed (see sort)'),
  category: z.string().max(100).optional().describe('Only the APIs of this category, e.g. weather or machine_learning'),
  callable: callableParam,
  sort: sortParam,
  ...paging,
});
const discoverQuery = z.object({
  q: z.string().optional(),
  query: z.string().optional(),
  callable: callableParam,
  limit: z.coerce.number().int().min(1).max(50).default(10).describe('How many APIs to answer, best first (1 to 50, default 10)'),
});

/**
 * The caller's holdings for "can I call this?": one small indexed query when the request carries
 * credentials, none when anonymous.
 */
function callerAccess(app: FastifyInstance, door: Door): Promise<CallerAccess> {
  const caller = door.callerIfAny;
  return caller === null ? Promise.resolve(NO_ACCESS) : loadCallerAccess(app.deps.sql, caller);
}
const apiParams = z.object({ id: apiId.describe('The directory API id, e.g. from discover_apis or search_apis') });

/** A search, a discovery or an API looked up with the account's credentials ticks the first-run checklist's "discover an API". */
function noteFinding(app: FastifyInstance, door: Door): void {
  const caller = door.callerIfAny;
  if (caller !== null) noteDiscovery(app.deps.sql, caller.accountId, (error) => app.log.warn({ err: error }, 'first discovery not recorded'));
}

/**
 * GET /apis as JSON bytes (cached): the route sends them as they are, the search_apis tool reads them.
 * Answers are cached per version of the access facts and per caller holdings (a caller holding
 * nothing shares the anonymous answer), so a state never outlives the change that moved it.
 */
async function searchApiBytes(app: FastifyInstance, door: Door, query: z.output<typeof searchQuery>): Promise<Buffer> {
  const { sql, redis, settings } = app.deps;
  const { q, cursor, limit, sort } = query;
  if (q !== undefined && sort !== undefined) {
    throw new PlatformError('validation_failed', 'sort applies to browsing only: search results (q) are ordered by relevance', {
      hint: 'Drop sort to search, or drop q to browse in that order.',
    });
  }
  const category = query.category?.toLowerCase();
  const callable = isCallableOnly(query.callable);
  if (q !== undefined) noteFinding(app, door);
  const [caller, snapshot] = await Promise.all([callerAccess(app, door), app.callability.snapshot()]);
  const key = cacheKey(settings, 'apis', q, category, sort, limit, cursor, callable ? 1 : 0, snapshot.version, caller.fingerprint);
  return cachedBytes(redis, key, settings.DIRECTORY_CACHE_SECONDS, async () => {
    if (q !== undefined) return app.directoryRanking.search({ q, category, limit, cursor, caller, callable });
    const only = callable ? snapshot.readySet(caller) : undefined;
    const page = await listApis(sql, app.directoryIndex, { category, limit, cursor, only, sort });
    const view = { snapshot: await app.callability.snapshotHolding(page.apis.map((a) => a.id)), caller };
    return apiPageAnswer(page, callable, cursor, view);
  });
}

/** GET /discover as JSON bytes (cached): the route sends them as they are, the discover_apis tool reads them. */
async function discoverBytes(app: FastifyInstance, door: Door, query: z.output<typeof discoverQuery>): Promise<Buffer> {
  const { redis, settings } = app.deps;
  const text = query.q ?? query.query;
  if (text === undefined) {
    throw new PlatformError('validation_failed', 'q is required', {
      hint: 'Describe the task: GET /api/v1/discover?q=send+a+text+message (alias: query).',
      tool: { error: 'query is required', hint: 'Describe the task: discover_apis (query: "send a text message").' },
    });
  }
  // Discovery answers also depend on the embedding model (or none): edges set up differently never share them.
  const discoveryMode = modelDirSetting(settings.DISCOVERY_MODEL_DIR) ?? 'words';
  const callable = isCallableOnly(query.callable);
  noteFinding(app, door);
  const [caller, snapshot] = await Promise.all([callerAccess(app, door), app.callability.snapshot()]);
  const key = cacheKey(settings, 'discover', discoveryMode, text, query.limit, callable ? 1 : 0, snapshot.version, caller.fingerprint);
  const answer = await cachedBytes(redis, key, settings.DIRECTORY_CACHE_SECONDS, () =>
    app.directoryRanking.discover({ text, limit: query.limit, caller, callable }),
  );
  // What was listed to whom, for discovery's feedback signal (a call that follows counts for the API).
  const account = door.callerIfAny?.accountId;
  if (account !== undefined && app.discoveryListings) app.discoveryListings.note(account, listedApiIds(answer));
  return answer;
}

/** The search_apis tool: GET /apis's answer. */
export const searchApis = operation(
  { querystring: searchQuery },
  async (app, door, { query }) => JSON.parse((await searchApiBytes(app, door, query)).toString('utf8')) as object,
);

/** The discover_apis tool: GET /discover's answer. */
export const discoverApis = operation(
  { querystring: discoverQuery },
  async (app, door, { query }) => JSON.parse((await discoverBytes(app, door, query)).toString('utf8')) as object,
);

/** GET /apis/:id and the get_api tool. */
export const readApi = operation({ params: apiParams }, async (app, door, { params }) => {
  const [row, caller] = await Promise.all([getApi(app.deps.sql, params.id), callerAccess(app, door)]);
  if (!row) throw notFound(`API ${params.id}`, 'Search with GET /api/v1/apis?q=... or GET /api/v1/discover?q=...');
  const callability = (await app.callability.statesOf([row.id], caller)).get(row.id);
  if (!callability) throw notFound(`API ${params.id}`, 'Search with GET /api/v1/apis?q=... or GET /api/v1/discover?q=...');
  noteFinding(app, door);
  return {
    ok: true as const,
    api: {
      ...toApiSummary({ ...row, description: row.description }, callability),
      version: row.version,
      baseUrl: publishedBaseUrl(row),
      authScheme: row.auth_scheme,
      oauth: row.oauth,
      oauthProvider: row.oauth_provider,
      keyDocsUrl: row.key_docs_url,
      proxyPath: proxyPath(row.id),
      byokPricePerCall: row.byok_price_micros === null ? null : toDollars(row.byok_price_micros),
      priceRules: priceRulesOf(row.pricing_rules),
      platformKey: row.has_platform_key,
      source: row.source,
      endpointCount: Math.max(row.endpoint_count, row.endpoints.length),
      endpoints: row.endpoints,
    },
  };
});

/** GET /apis/:id/instructions and the get_api_instructions tool ($0.01; an unknown API costs nothing). */
export const readApiInstructions = operation({ params: apiParams }, async (app, door, { params }) => {
  const [row, caller] = await Promise.all([getApi(app.deps.sql, params.id), callerAccess(app, door)]);
  // Looked up before charging: an unknown API costs nothing.
  if (!row) throw notFound(`API ${params.id}`, 'Nothing was charged. Search with GET /api/v1/apis?q=...');
  const callability = (await app.callability.statesOf([row.id], caller)).get(row.id);
  if (!callability) throw notFound(`API ${params.id}`, 'Nothing was charged. Search with GET /api/v1/apis?q=...');
  await door.charge({ costMicros: PRICES.instructions, item: 'instructions', apiId: row.id });
  const source = {
    id: row.id,
    name: row.name,
    provider: row.provider,
    service: row.service,
    description: row.description,
    baseUrl: publishedBaseUrl(row),
    authScheme: row.auth_scheme,
    categories: row.categories,
    endpoints: row.endpoints,
    endpointCount: Math.max(row.endpoint_count, row.endpoints.length),
  };
  const stored = row.instructions ?? generateInstructions(source);
  const via = door.via ?? 'rest';
  // The per-path prices as the proxy applies them (pricing_rules), in the order it tries them.
  const prices = { priceMicros: row.price_micros, byokPriceMicros: row.byok_price_micros, rules: pricingRulesOf(row.pricing_rules) };
  // What the caller can do now is stated at serve time: the stored text is the same for everyone.
  const body = via === 'mcp' ? mcpInstructions(stored, source, callability) : stored;
  return {
    ok: true as const,
    apiId: row.id,
    format: 'markdown' as const,
    // The REST examples' $BASE_URL becomes this deployment's address.
    instructions: (body + '\n' + callabilityInstructions(row.id, callability, via) + instructionsFooter(row.id, prices, callability, via)).replaceAll(
      '$BASE_URL',
      app.deps.settings.PUBLIC_URL,
    ),
  };
});

/**
 * The directory: browse and search (public), categories, natural-language discovery (public) and
 * agent-readable instructions ($0.01, charged only for an API that exists).
 */
const directoryRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings } = app.deps;
  const ttl = settings.DIRECTORY_CACHE_SECONDS;

  app.get(
    '/apis',
    {
      serializerCompiler: plainJson,
      config: { auth: 'optional' },
      schema: {
        tags: ['directory'],
        summary: 'List or search APIs (relevance-ranked when q is given)',
        querystring: searchQuery,
        response: { 200: page },
      },
    },
    async (request, reply) => sendJsonBytes(reply, await searchApiBytes(app, restDoor(request, reply), request.query)),
  );

  app.get(
    '/apis/category/:category',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['directory'],
        summary: 'List the APIs of one category (404 for a category no API has)',
        params: z.object({ category: z.string().min(1).max(100) }),
        querystring: z.object({ sort: sortParam, ...paging }),
        response: { 200: page },
      },
    },
    async (request, reply) => {
      const category = request.params.category.toLowerCase();
      if (!(await categoryExists(sql, category))) throw notFound(`Category ${category}`, 'GET /api/v1/categories lists every category.');
      const [result, caller] = await Promise.all([
        listApis(sql, app.directoryIndex, { category, limit: request.query.limit, cursor: request.query.cursor, sort: request.query.sort }),
        callerAccess(app, restDoor(request, reply)),
      ]);
      const states = await app.callability.statesOf(
        result.apis.map((a) => a.id),
        caller,
      );
      return {
        ok: true as const,
        apis: result.apis.flatMap((a) => {
          const callability = states.get(a.id);
          return callability ? [toApiSummary(a, callability)] : [];
        }),
        nextCursor: result.nextCursor,
      };
    },
  );

  app.get(
    '/categories',
    {
      schema: {
        tags: ['directory'],
        summary: 'Every category with the number of APIs in it',
        response: {
          200: z.object({ ok: z.literal(true), categories: z.array(z.object({ id: z.string(), name: z.string(), apiCount: z.number().int() })) }),
        },
      },
    },
    async () =>
      cachedJson(redis, cacheKey(settings, 'categories'), ttl, async () => {
        const rows = await listCategories(sql);
        return { ok: true as const, categories: rows.map((r) => ({ id: r.id, name: categoryName(r.id), apiCount: r.api_count })) };
      }),
  );

  app.get(
    '/apis/:id',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['directory'],
        summary: 'API details: auth scheme, endpoints, the proxy path and, for catalog APIs, the upstream base URL',
        params: readApi.schemas.params,
        response: { 200: z.object({ ok: z.literal(true), api: apiDetail }) },
      },
    },
    async (request, reply) => readApi.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/apis/:id/instructions',
    {
      // Priced: no implicit HEAD route, which would charge for a response without a body.
      exposeHeadRoute: false,
      config: { auth: 'key', priced: true },
      schema: {
        tags: ['directory'],
        summary: 'Agent-readable instructions for one API ($0.01)',
        params: readApiInstructions.schemas.params,
        response: { 200: z.object({ ok: z.literal(true), apiId: z.string(), format: z.literal('markdown'), instructions: z.string() }) },
      },
    },
    async (request, reply) => readApiInstructions.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/discover',
    {
      serializerCompiler: plainJson,
      config: { auth: 'optional' },
      schema: {
        tags: ['directory'],
        summary: 'Natural-language discovery: describe a task, get the APIs that can do it',
        querystring: discoverQuery,
        response: {
          200: z.object({
            ok: z.literal(true),
            query: z.string(),
            results: z.array(
              z.object({
                api: apiSummary,
                score: z
                  .number()
                  .describe(
                    'Relevance, best first, over the first result (the first is 1): the word score, plus with the model 5 x the similarity in meaning to the API and 1 x that to a capability it belongs to (docs/DISCOVERY.md).',
                  ),
                reason: z
                  .string()
                  .describe(
                    'Why it matched: the query words found in the API, up to three matching endpoints, and its similarity in meaning when it was found that way.',
                  ),
                matched: z
                  .object({
                    endpoints: z
                      .array(z.object({ method: z.string(), path: z.string(), summary: z.string() }))
                      .describe('Up to three endpoints whose summary or path names the words of the task, best first.'),
                    sentence: z
                      .string()
                      .nullable()
                      .describe("The sentence of the API's description naming the most words of the task, or null when none does."),
                  })
                  .describe('What of the API matched the task, for showing to a person: no scores.'),
                operations: z
                  .array(
                    z.object({
                      method: z.string().describe('HTTP method, as its description writes it.'),
                      path: z
                        .string()
                        .describe(
                          'Path under the API, as its description writes it ({id} is a parameter); called through /api/v1/proxy/{api id} + path.',
                        ),
                      summary: z.string(),
                      price: z
                        .number()
                        .describe("What one call on this path costs, in dollars: its pricing rule's price, else the API's pricePerCall."),
                    }),
                  )
                  .describe(
                    'Up to three operations of the API that do the task, best first, each with the price that applies to its path; empty when no operation names the words of the task.',
                  ),
              }),
            ),
            interpreted: z.object({
              words: z.array(z.string()),
              corrections: z.record(z.string(), z.string()),
              expansions: z.array(z.string()),
              capabilities: z
                .array(z.string())
                .describe(
                  'The kinds of service the task was read as (e.g. "sms", "free-busy", "image-generation"): the one closest in meaning and those its wording names; empty when none applies or discovery ranks by words only.',
                ),
            }),
            hint: z.string().optional(),
          }),
        },
      },
    },
    async (request, reply) => sendJsonBytes(reply, await discoverBytes(app, restDoor(request, reply), request.query)),
  );
};

export default directoryRoutes;
