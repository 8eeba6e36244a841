import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runApiCli } from '#cli/api-cli';
import { loadCookbooks } from '#db/cookbooks';
import { createKey } from '#db/keys';
import { PlatformError } from '#core/platform';
import { toolText, toolWording } from '#edge/mcp/wording';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// MCP that speaks MCP (issue 31, items 3 to 6), driven by the official MCP client against a listening
// edge and a real upstream: tool errors and instructions name tools and arguments (never routes,
// headers or curl), every argument is described, per-path prices show before the call on every
// door, the upstream's own signals reach call_api's result, and the lean tool profile.

type Structured<T> = CallToolResult & { structuredContent: T };

function toolError(result: CallToolResult): Record<string, unknown> & { status: number; code: string; error: string; hint?: string } {
  expect(result.isError, JSON.stringify(result)).toBe(true);
  const text = result.content.find((block) => block.type === 'text') as { text: string };
  return JSON.parse(text.text) as Record<string, unknown> & { status: number; code: string; error: string; hint?: string };
}

function ok<T>(result: CallToolResult): T {
  expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 600)).toBe(false);
  return (result as Structured<T>).structuredContent;
}

/** What a tool caller must never be told: REST routes, HTTP header names, query strings, curl. */
const REST_WORDS = [
  /\/api\/v1/,
  /\b(GET|POST|PUT|PATCH|DELETE) \//,
  /X-Max-Cost/i,
  /X-Service-/i,
  /Retry-After/i,
  /Idempotency-Key/i,
  /Last-Event-ID/i,
  /\?q=/,
  /\bq=/,
  /\bcurl\b/i,
];
const expectToolWords = (where: string, text: string, extra: RegExp[] = []) => {
  for (const word of [...REST_WORDS, ...extra]) expect(text, `${where}: ${text}`).not.toMatch(word);
};

describe('MCP that speaks MCP: wording, prices, upstream signals, profiles', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let account: TestAccount;
  let poor: TestAccount;
  let pricedApi: string;
  let keyApi: string;
  let failingApi: string;
  const clients: Client[] = [];
  const word = `quokka${randomUUID()
    .replace(/[^a-f]/g, '')
    .slice(0, 6)}`;

  async function connect(key: string, path = '/mcp'): Promise<Client> {
    const client = new Client({ name: 'mcp-words-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}${path}`), { authProvider: { token: async () => key } }));
    clients.push(client);
    return client;
  }
  const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }) as Promise<CallToolResult>;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      if (path.endsWith('/limited')) {
        res.writeHead(200, {
          'content-type': 'application/json',
          'x-ratelimit-limit': '60',
          'x-ratelimit-remaining': '41',
          'x-request-id': 'up-req-7',
          'retry-after': '3',
          ratelimit: 'limit=60, remaining=41, reset=30',
        });
        res.end('{"ok":true}');
      } else if (path.endsWith('/moved')) {
        res.writeHead(302, { location: '/priced/landing?x=1' });
        res.end();
      } else if (path.endsWith('/away')) {
        res.writeHead(302, { location: 'https://elsewhere.example/page' });
        res.end();
      } else if (path.endsWith('/down')) {
        res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '7' });
        res.end('maintenance');
      } else if (path.endsWith('/broken')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('boom');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ path }));
      }
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: uniqueId('mcpwords') });
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    pricedApi = uniqueId('priced-');
    await runApiCli(
      [
        'add',
        '--id',
        pricedApi,
        '--name',
        `Marsupial ${word} Sightings`,
        '--base-url',
        `${upstream.url}/priced`,
        '--price',
        '0.001',
        '--auth',
        'none',
        '--description',
        `Report and count ${word} marsupial sightings.`,
        '--rule',
        'GET /dear=2',
        '--rule',
        '* /bulk/*=0.05',
      ],
      { ...process.env, DATABASE_URL: testDatabaseUrl() },
    );
    keyApi = await registerApi({ baseUrl: `${upstream.url}/keyed`, price: '0.001', auth: 'header:X-Upstream-Key' });
    failingApi = await registerApi({ baseUrl: `${upstream.url}/failing`, price: '0.001' });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 10_000_000n });
    poor = await createTestAccount(app.deps.sql, { balanceMicros: 0n });
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await app?.close();
    await upstream?.close();
  });

  it('every argument of every tool is described; maxCost states the real refusal (409 max_cost_exceeded)', async () => {
    const owner = await createTestAccount(app.deps.sql, { balanceMicros: 0n });
    const agent = await createKey(app.deps.sql, { accountId: owner.accountId, kind: 'agent', name: 'one api', allowedApis: [pricedApi] });
    let counted = 0;
    const undescribed: string[] = [];
    for (const key of [account.fullKey, agent.fullKey]) {
      const { tools } = await (await connect(key)).listTools();
      for (const tool of tools) {
        for (const [name, schema] of Object.entries(tool.inputSchema.properties ?? {})) {
          const description = (schema as { description?: unknown }).description;
          if (!(typeof description === 'string' && description.length > 10)) undescribed.push(`${tool.name}.${name}`);
          counted += 1;
        }
        const maxCost = tool.inputSchema.properties?.maxCost as { description?: string } | undefined;
        if (maxCost) {
          expect(maxCost.description, tool.name).toContain('409 max_cost_exceeded');
          expect(maxCost.description, tool.name).not.toContain('402');
        }
      }
    }
    expect(undescribed).toEqual([]);
    expect(counted).toBeGreaterThan(40);
  });

  it('every tool error names tools and arguments, never routes, headers or query strings', async () => {
    const client = await connect(account.fullKey);
    const poorClient = await connect(poor.fullKey);
    const { docs } = ok<{ docs: { slug: string; price: number }[] }>(await call(client, 'list_docs'));
    const pricedDoc = docs.find((doc) => doc.price > 0)!;
    const missing = randomUUID();
    // Each tool's refusals: [tool, arguments, status, code, words the error or hint must carry].
    const paths: [Client, string, Record<string, unknown>, number, string, RegExp?][] = [
      [client, 'discover_apis', {}, 400, 'validation_failed', /query/],
      [client, 'discover_apis', { query: 'send a text', limit: 500 }, 400, 'validation_failed', /limit/],
      [client, 'search_apis', { q: 'weather', sort: 'name' }, 400, 'validation_failed', /sort/],
      [client, 'search_apis', { cursor: 'not-a-cursor' }, 400, 'validation_failed', /cursor/],
      [client, 'get_api', { id: 'no-such-api-here' }, 404, 'not_found', /search_apis|discover_apis/],
      [client, 'get_api', { id: 'Not An Id' }, 400, 'validation_failed', /id/],
      [client, 'get_api_instructions', { id: 'no-such-api-here' }, 404, 'not_found', /search_apis/],
      [client, 'get_api_instructions', { id: pricedApi, maxCost: 0.001 }, 409, 'max_cost_exceeded', /maxCost/],
      [client, 'get_api_instructions', { id: pricedApi, maxCost: 'lots' }, 400, 'validation_failed', /maxCost/],
      [poorClient, 'get_api_instructions', { id: pricedApi }, 402, 'insufficient_balance', /get_balance/],
      [client, 'get_usage', { days: 0 }, 400, 'validation_failed', /days/],
      [client, 'request_connection', { apiId: 'no-such-api-here', purpose: 'To check the wording of refusals' }, 404, 'not_found', /discover_apis/],
      [client, 'request_connection', { apiId: pricedApi, purpose: 'To check the wording of refusals' }, 409, 'conflict', /call_api/],
      [
        client,
        'request_connection',
        { apiId: keyApi, purpose: 'To check the wording of refusals', scopes: ['read'] },
        400,
        'validation_failed',
        /scopes/,
      ],
      [client, 'get_connection_request', { requestId: missing }, 404, 'not_found', /list_connection_requests/],
      [client, 'get_activity', { cursor: 'not-a-cursor' }, 400, 'validation_failed', /cursor/],
      [client, 'list_cookbooks', { limit: 0 }, 400, 'validation_failed'],
      [client, 'get_cookbook', { id: 'no-such-cookbook' }, 404, 'not_found', /list_cookbooks/],
      [client, 'get_cookbook', { id: 'weather-alert-sms', maxCost: 0 }, 409, 'max_cost_exceeded', /maxCost/],
      [client, 'start_cookbook', { id: 'no-such-cookbook', selectedApis: {} }, 404, 'not_found', /list_cookbooks/],
      [client, 'start_cookbook', { id: 'weather-alert-sms', selectedApis: {} }, 400, 'validation_failed', /discover_apis/],
      [
        client,
        'start_cookbook',
        { id: 'weather-alert-sms', selectedApis: { weather: 'no-such-api-here', sms: 'no-such-api-here' } },
        400,
        'validation_failed',
        /search_apis/,
      ],
      [
        client,
        'start_cookbook',
        { id: 'weather-alert-sms', selectedApis: { weather: keyApi, sms: pricedApi } },
        409,
        'api_not_callable',
        /request_connection/,
      ],
      [client, 'get_session', { sessionId: missing }, 404, 'not_found', /list_sessions/],
      [client, 'get_current_step', { sessionId: missing }, 404, 'not_found', /list_sessions/],
      [client, 'complete_step', { sessionId: missing, stepId: 'x', resultData: {} }, 404, 'not_found', /list_sessions/],
      [client, 'get_session_events', { sessionId: missing }, 404, 'not_found', /list_sessions/],
      [client, 'search_docs', { q: '!!' }, 400, 'validation_failed', /search_docs/],
      [client, 'get_doc', { slug: 'no-such-section' }, 404, 'not_found', /list_docs/],
      [client, 'get_doc', { slug: pricedDoc.slug, maxCost: 0 }, 409, 'max_cost_exceeded', /maxCost/],
      [client, 'call_api', { apiId: 'no-such-api-here' }, 404, 'not_found', /search_apis/],
      [client, 'call_api', { apiId: keyApi, path: '/x' }, 409, 'connection_required', /request_connection/],
      [client, 'call_api', { apiId: pricedApi, path: '/dear', maxCost: 1 }, 409, 'max_cost_exceeded', /raise maxCost/i],
      [client, 'call_api', { apiId: pricedApi, maxCost: 'lots' }, 400, 'validation_failed', /maxCost/],
      [client, 'call_api', { apiId: pricedApi, headers: { 'X-Max-Cost': '5' } }, 400, 'validation_failed', /maxCost/],
      [client, 'call_api', { apiId: pricedApi, headers: { Authorization: 'x' } }, 400, 'validation_failed'],
      [client, 'call_api', { apiId: pricedApi, path: '/x?y=1' }, 400, 'validation_failed', /query argument/],
      [client, 'call_api', { apiId: pricedApi, method: 'TRACE' }, 400, 'validation_failed', /method/],
      [client, 'call_api', { apiId: failingApi, path: '/down' }, 503, 'upstream_unavailable', /retryAfter/],
      [client, 'call_api', { apiId: failingApi, path: '/broken' }, 502, 'upstream_error', /refunded/],
      [poorClient, 'call_api', { apiId: pricedApi, path: '/x' }, 402, 'insufficient_balance', /get_balance/],
    ];
    const seen = new Set<string>();
    for (const [who, tool, args, status, code, words] of paths) {
      const where = `${tool} ${JSON.stringify(args)}`;
      const error = toolError(await call(who, tool, args));
      expect(error, where).toMatchObject({ status, code });
      // The caller's own argument (headers.X-Max-Cost) may be named back; nothing else of REST may.
      const text = `${error.error} ${error.hint ?? ''}`.replaceAll('headers.X-Max-Cost', 'headers.<name>');
      // An error also never asks for a header (an upstream's auth header in the instructions is the API's own).
      expectToolWords(where, text, [/\bheader\b/i]);
      if (words) expect(text, where).toMatch(words);
      seen.add(tool);
    }
    // Every tool that can refuse is walked (the list tools without arguments never refuse a valid call).
    const { tools } = await client.listTools();
    const quiet = new Set(['get_balance', 'list_connection_requests', 'list_sessions', 'list_docs']);
    for (const tool of tools) if (!quiet.has(tool.name)) expect(seen.has(tool.name), `no error path of ${tool.name} is checked`).toBe(true);
  });

  it('the wording layer: route references become tool calls, Retry-After becomes retryAfter, tool wording wins', () => {
    expect(toolText('Search with GET /api/v1/apis?q=... or GET /api/v1/discover?q=....')).toBe(
      'Search with search_apis (q: "...") or discover_apis (query: "...").',
    );
    expect(toolText('GET /api/v1/cookbooks/sessions/abc/step for the current step.')).toBe(
      'get_current_step (sessionId: "abc") for the current step.',
    );
    expect(toolText('Ask with POST /api/v1/connect/weather/request {"purpose": "..."} (MCP: request_connection).')).toBe(
      'Ask with request_connection (apiId: "weather", purpose: "...").',
    );
    expect(toolText('Wait 3 seconds (Retry-After) before retrying.')).toBe('Wait 3 seconds (retryAfter) before retrying.');
    const refusal = new PlatformError('max_cost_exceeded', 'above your X-Max-Cost', {
      hint: 'Raise X-Max-Cost',
      tool: { error: 'above your maxCost', hint: 'Raise maxCost' },
    });
    expect(toolWording(refusal)).toEqual({ error: 'above your maxCost', hint: 'Raise maxCost' });
  });

  it('a rate-limited tool call says retryAfter, not Retry-After', async () => {
    const limited = await createTestApp({ REDIS_PREFIX: uniqueId('mcpwl'), RATE_LIMIT_KEY_MAX: '2', RATE_LIMIT_KEY_WINDOW_SECONDS: '300' });
    try {
      await limited.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(limited.server.address() as AddressInfo).port}`;
      const client = new Client({ name: 'mcp-words-limited', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: { token: async () => account.fullKey } }));
      let refusal: ReturnType<typeof toolError> | null = null;
      for (let i = 0; i < 5 && refusal === null; i++) {
        const result = await call(client, 'get_balance');
        if (result.isError) refusal = toolError(result);
      }
      await client.close();
      expect(refusal).toMatchObject({ status: 429, code: 'rate_limited', retryAfter: expect.any(Number) });
      expectToolWords('rate_limited', `${refusal!.error} ${refusal!.hint ?? ''}`);
      expect(refusal!.hint).toContain('retryAfter');
    } finally {
      await limited.close();
    }
  });

  it('instructions through MCP describe call_api, not curl; through REST they keep curl; neither contradicts itself', async () => {
    const client = await connect(account.fullKey);
    for (const apiId of [pricedApi, keyApi]) {
      const { instructions } = ok<{ instructions: string }>(await call(client, 'get_api_instructions', { id: apiId }));
      expect(instructions).toContain('call_api(apiId, method, path, query, body, maxCost)');
      expect(instructions).toContain('"apiId": "' + apiId + '"');
      expectToolWords(`instructions of ${apiId}`, instructions.replace(/`(GET|POST|PUT|PATCH|DELETE) \/[^`]*`/g, ''));
      const rest = await fetch(`${edge}/api/v1/apis/${apiId}/instructions`, { headers: { authorization: `Bearer ${account.fullKey}` } });
      const restText = ((await rest.json()) as { instructions: string }).instructions;
      expect(restText).toContain('curl -X GET');
      expect(restText).toContain(`/api/v1/proxy/${apiId}/`);
    }
    // An API that needs no credentials is never told to connect a key first.
    const { instructions } = ok<{ instructions: string }>(await call(client, 'get_api_instructions', { id: pricedApi }));
    expect(instructions).toContain('needs no credentials');
    expect(instructions).not.toMatch(/connection_required|connect your own key|connect it first/i);
    // One that needs a key says to ask a person, with the tool that does it.
    const keyed = ok<{ instructions: string }>(await call(client, 'get_api_instructions', { id: keyApi })).instructions;
    expect(keyed).toContain(`request_connection (apiId: "${keyApi}"`);
    expect(keyed).toContain('`409` `connection_required`');
  });

  it('per-path prices show before the call: get_api, discover_apis, search_apis, the instructions and GET /apis/{id}', async () => {
    const client = await connect(account.fullKey);
    const rules = [
      { method: 'GET', path: '/dear', pricePerCall: 2 },
      { method: '*', path: '/bulk/*', pricePerCall: 0.05 },
    ];
    const detail = ok<{ api: { pricePerCall: number; priceRules: unknown } }>(await call(client, 'get_api', { id: pricedApi }));
    expect(detail.api).toMatchObject({ pricePerCall: 0.001, priceRules: rules });
    const rest = (await (await fetch(`${edge}/api/v1/apis/${pricedApi}`)).json()) as { api: { priceRules: unknown } };
    expect(rest.api.priceRules).toEqual(rules);
    // An API without rules says so with an empty list (and summaries leave the field out).
    const plain = (await (await fetch(`${edge}/api/v1/apis/${failingApi}`)).json()) as { api: { priceRules: unknown } };
    expect(plain.api.priceRules).toEqual([]);

    const { instructions } = ok<{ instructions: string }>(await call(client, 'get_api_instructions', { id: pricedApi }));
    expect(instructions).toContain('- `GET /dear`: $2 per call');
    expect(instructions).toContain('- `* /bulk/*`: $0.05 per call');
    const restInstructions = await fetch(`${edge}/api/v1/apis/${pricedApi}/instructions`, {
      headers: { authorization: `Bearer ${account.fullKey}` },
    });
    expect(((await restInstructions.json()) as { instructions: string }).instructions).toContain('- `GET /dear`: $2 per call');

    // Discovery and search read the in-process index, which reloads moments after the API was added.
    type Found = { api: { id: string; priceRules?: unknown } };
    let discovered: Found | undefined;
    let searched: { id: string; priceRules?: unknown } | undefined;
    for (let attempt = 0; attempt < 40 && (!discovered || !searched); attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 250));
      const found = ok<{ results: Found[] }>(await call(client, 'discover_apis', { query: `count ${word} sightings`, limit: 10 }));
      discovered = found.results.find((result) => result.api.id === pricedApi);
      const page = ok<{ apis: { id: string; priceRules?: unknown }[] }>(await call(client, 'search_apis', { q: word }));
      searched = page.apis.find((api) => api.id === pricedApi);
    }
    expect(discovered?.api.priceRules).toEqual(rules);
    expect(searched?.priceRules).toEqual(rules);

    // And the call costs what was shown.
    const dear = ok<{ status: number; cost: number }>(await call(client, 'call_api', { apiId: pricedApi, path: '/dear', maxCost: 2 }));
    expect(dear).toMatchObject({ status: 200, cost: 2 });
    const cheap = ok<{ cost: number }>(await call(client, 'call_api', { apiId: pricedApi, path: '/cheap' }));
    expect(cheap.cost).toBe(0.001);
  });

  it("call_api's result carries the upstream's rate limits and request id, and redirects in the API's own space", async () => {
    const client = await connect(account.fullKey);
    const limited = ok<{ headers: Record<string, string> }>(await call(client, 'call_api', { apiId: pricedApi, path: '/limited' }));
    expect(limited.headers).toMatchObject({
      'x-upstream-ratelimit-limit': '60',
      'x-upstream-ratelimit-remaining': '41',
      'x-upstream-request-id': 'up-req-7',
      'retry-after': '3',
      ratelimit: 'limit=60, remaining=41, reset=30',
    });
    expect(limited.headers['x-ratelimit-limit']).toBeUndefined();
    expect(limited.headers['x-request-id']).toBeUndefined();
    const moved = ok<{ status: number; headers: Record<string, string> }>(await call(client, 'call_api', { apiId: pricedApi, path: '/moved' }));
    expect(moved).toMatchObject({ status: 302, headers: { location: '/landing?x=1' } });
    const away = ok<{ headers: Record<string, string> }>(await call(client, 'call_api', { apiId: pricedApi, path: '/away' }));
    expect(away.headers.location).toBe('https://elsewhere.example/page');
    // Over REST the same upstream answer carries the renamed headers (and the untouched IETF RateLimit field).
    const rest = await fetch(`${edge}/api/v1/proxy/${pricedApi}/limited`, { headers: { authorization: `Bearer ${account.fullKey}` } });
    expect(rest.headers.get('x-upstream-ratelimit-remaining')).toBe('41');
    expect(rest.headers.get('x-upstream-request-id')).toBe('up-req-7');
    expect(rest.headers.get('ratelimit')).toBe('limit=60, remaining=41, reset=30');
    expect(rest.headers.get('x-request-id')).not.toBe('up-req-7');
  });

  it('a lean tool profile on request (/mcp?profile=calls), measured', async () => {
    const full = await connect(account.fullKey);
    const lean = await connect(account.fullKey, '/mcp?profile=calls');
    const fullTools = (await full.listTools()).tools;
    const leanTools = (await lean.listTools()).tools;
    expect(leanTools.map((tool) => tool.name).sort()).toEqual(
      ['call_api', 'discover_apis', 'get_api', 'get_balance', 'get_connection_request', 'request_connection', 'search_apis'].sort(),
    );
    expect(lean.getInstructions()).toContain('get_api');
    expect(lean.getInstructions()).not.toContain('cookbook:');
    // The tools work in the lean profile as in the full one.
    expect(ok<{ balance: number }>(await call(lean, 'get_balance')).balance).toBeGreaterThan(0);
    // A tool outside the profile is not there to call.
    const outside = await call(lean, 'list_cookbooks').catch((error: unknown) => ({
      isError: true,
      content: [{ type: 'text', text: String(error) }],
    }));
    expect(outside.isError).toBe(true);

    // What tools/list costs a model's context, at about 4 characters per token (docs/API.md quotes these):
    // the whole answer, and the part most clients put before the model (name, description, inputSchema).
    const tokens = (tools: unknown[]) => Math.round(JSON.stringify({ tools }).length / 4);
    const seen = (tools: typeof fullTools) => tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
    const measured = {
      full: { tools: fullTools.length, tokens: tokens(fullTools), modelTokens: tokens(seen(fullTools)) },
      calls: { tools: leanTools.length, tokens: tokens(leanTools), modelTokens: tokens(seen(leanTools)) },
    };
    console.log(`[mcp profiles] tools/list: ${JSON.stringify(measured)}`);
    expect(measured.calls.tokens).toBeLessThan(measured.full.tokens / 2);
    expect(measured.calls.modelTokens).toBeLessThan(measured.full.modelTokens / 2);

    const unknown = await fetch(`${edge}/mcp?profile=everything`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.fullKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(unknown.status).toBe(400);
    const body = (await unknown.json()) as { jsonrpc: string; error: { code: number; message: string; data: { code: string } } };
    expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32602, data: { code: 'validation_failed' } } });
    expect(body.error.message).toContain('profile=calls');
  });
});
