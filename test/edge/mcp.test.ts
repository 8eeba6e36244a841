import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { createKey } from '#db/keys';
import { usageProcessor } from '#workers/queues/usage';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// An agent's whole journey through the MCP endpoint with the official MCP TypeScript client (SDK v2,
// Streamable HTTP, protocol 2026-07-28) against a listening edge, a real upstream, Postgres, Redis,
// the usage worker and a Temporal worker.

const FORECAST = { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning', severity: 'severe' }] };
const DRAFT = { message: 'Storm tonight from 20:00. Stay indoors.', recipients: ['+4712345678'] };

type Structured<T> = CallToolResult & { structuredContent: T };

/** The error a tool answered with: the platform's error body plus the HTTP status. */
function toolError(result: CallToolResult): Record<string, unknown> & { status: number; code: string } {
  expect(result.isError, JSON.stringify(result)).toBe(true);
  const text = result.content.find((block) => block.type === 'text');
  return JSON.parse((text as { text: string }).text) as Record<string, unknown> & { status: number; code: string };
}

function ok<T>(result: CallToolResult): T {
  expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 600)).toBe(false);
  return (result as Structured<T>).structuredContent;
}

describe('the MCP endpoint, driven by the official MCP client', () => {
  const taskQueue = uniqueId('mcp-');
  const prefix = uniqueId('mcp');
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let usageWorker: Worker;
  let temporalWorker: RunningWorker;
  let account: TestAccount;
  let weatherApi: string;
  let smsApi: string;
  const clients: Client[] = [];

  async function connect(key: string, protocol: string | 'legacy' = '2026-07-28'): Promise<Client> {
    const client = new Client(
      { name: 'mcp-test-agent', version: '1.0.0' },
      protocol === 'legacy' ? {} : { versionNegotiation: { mode: { pin: protocol } } },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => key } }));
    clients.push(client);
    return client;
  }
  const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }) as Promise<CallToolResult>;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (path?.endsWith('/forecast')) {
        res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'weather' });
        res.end(JSON.stringify({ ...FORECAST, query: req.url }));
      } else if (path?.endsWith('/image')) {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]));
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('no such path');
      }
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, TEMPORAL_TASK_QUEUE: taskQueue, USAGE_FLUSH_MS: '20' });
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    usageWorker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix, concurrency: 2 });
    temporalWorker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix: prefix });
    weatherApi = await registerApi({ baseUrl: `${upstream.url}/weather`, price: '0.002' });
    smsApi = await registerApi({ baseUrl: `${upstream.url}/sms`, price: '0.001' });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await temporalWorker?.stop();
    await usageWorker?.close();
    await workerRedis?.quit();
    await upstream?.close();
  });

  it('lists every tool with input and output schemas; priced tools say they spend money', async () => {
    const client = await connect(account.fullKey);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name).sort();
    expect(names).toEqual(
      [
        'call_api',
        'complete_step',
        'discover_apis',
        'get_api',
        'get_api_instructions',
        'get_balance',
        'get_cookbook',
        'get_current_step',
        'get_doc',
        'get_session',
        'get_session_events',
        'get_connection_request',
        'get_usage',
        'list_connection_requests',
        'get_activity',
        'list_cookbooks',
        'list_docs',
        'list_sessions',
        'request_connection',
        'search_apis',
        'search_docs',
        'start_cookbook',
      ].sort(),
    );
    for (const tool of tools) {
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(tool.description, tool.name).toBeTruthy();
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    // Arguments come from the REST routes' own schemas.
    expect(byName.get('discover_apis')!.inputSchema).toMatchObject({
      properties: { query: { type: 'string' }, limit: { maximum: 50 } },
      required: ['query'],
    });
    expect(byName.get('complete_step')!.inputSchema.required).toEqual(expect.arrayContaining(['sessionId', 'stepId', 'resultData']));
    for (const priced of ['get_api_instructions', 'get_cookbook', 'get_doc', 'call_api']) {
      expect(byName.get(priced)!.description, priced).toContain('Spends money');
      expect(byName.get(priced)!.inputSchema.properties, priced).toHaveProperty('maxCost');
    }
    expect(byName.get('get_api_instructions')!.description).toContain('$0.01');
    expect(byName.get('get_balance')!.annotations).toMatchObject({ readOnlyHint: true });
    // Spending money is a side effect: priced tools are never marked read-only.
    for (const priced of ['get_api_instructions', 'get_cookbook', 'get_doc'])
      expect(byName.get(priced)!.annotations, priced).toMatchObject({ readOnlyHint: false, idempotentHint: false });
    expect(byName.get('call_api')!.annotations).toMatchObject({ readOnlyHint: false, openWorldHint: true });
  });

  it('discovers an API, buys its instructions and calls it through call_api: charged, in the ledger and in usage', async () => {
    const agent = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const client = await connect(agent.fullKey);

    const found = ok<{
      results: { api: { id: string; pricePerCall: number }; operations: { method: string; path: string; summary: string; price: number }[] }[];
      interpreted: { words: string[] };
    }>(await call(client, 'discover_apis', { query: 'send a text message', limit: 5 }));
    expect(found.results.length).toBeGreaterThan(0);
    expect(found.interpreted.words.length).toBeGreaterThan(0);
    // Each result names the operations to call, with what a call on each costs (no pricing rules here: the API's price).
    const named = found.results.flatMap((r) => r.operations.map((o) => ({ ...o, apiPrice: r.api.pricePerCall })));
    expect(named.length, JSON.stringify(found.results)).toBeGreaterThan(0);
    for (const o of named) {
      expect(o.method).toMatch(/^[A-Z]+$/);
      expect(o.path.startsWith('/')).toBe(true);
      expect(o.price).toBe(o.apiPrice);
    }

    const detail = ok<{ api: { id: string; pricePerCall: number; proxyPath: string } }>(await call(client, 'get_api', { id: weatherApi }));
    expect(detail.api).toMatchObject({ id: weatherApi, pricePerCall: 0.002 });
    // An operator-registered API's upstream may be a private host: neither its details nor its instructions publish it (finding 14).
    expect(detail.api).toMatchObject({ source: 'operator', baseUrl: null });
    expect(JSON.stringify(detail)).not.toContain(upstream.url);

    const instructions = await call(client, 'get_api_instructions', { id: weatherApi });
    expect(ok<{ apiId: string; instructions: string }>(instructions)).toMatchObject({
      apiId: weatherApi,
      instructions: expect.stringContaining(weatherApi),
    });
    expect(JSON.stringify(instructions.content)).not.toContain(upstream.url);
    const rest = await app.inject({ method: 'GET', url: `/api/v1/apis/${weatherApi}` });
    expect(rest.statusCode, rest.body).toBe(200);
    expect(rest.json()).toMatchObject({ ok: true, api: { id: weatherApi, source: 'operator', baseUrl: null } });
    expect(rest.body).not.toContain(upstream.url);
    const reader = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const restInstructions = await app.inject({
      method: 'GET',
      url: `/api/v1/apis/${weatherApi}/instructions`,
      headers: { authorization: `Bearer ${reader.fullKey}` },
    });
    expect(restInstructions.statusCode, restInstructions.body).toBe(200);
    expect(restInstructions.body).not.toContain(upstream.url);
    expect(instructions._meta?.['agent-api-platform/charge']).toMatchObject({ cost: 0.01, balance: 0.99 });

    const called = await call(client, 'call_api', { apiId: weatherApi, path: '/forecast', query: { city: 'Oslo', days: 2 } });
    const answer = ok<{ status: number; body: string; headers: Record<string, string>; cost: number; balance: number; chargeId: string }>(called);
    expect(answer).toMatchObject({ status: 200, cost: 0.002, balance: 0.988, chargeId: expect.any(String) });
    expect(JSON.parse(answer.body)).toMatchObject({ ...FORECAST, query: '/weather/forecast?city=Oslo&days=2' });
    expect(answer.headers['x-upstream']).toBe('weather');
    expect(Object.keys(answer.headers).some((name) => name.startsWith('x-service-'))).toBe(false);
    expect(upstream.seen.at(-1)?.headers.authorization).toBeUndefined();

    // The upstream's own 404 is the upstream's answer (charged), not a tool error; binary bodies come as base64.
    expect(ok<{ status: number; body: string }>(await call(client, 'call_api', { apiId: weatherApi, path: 'nothing' }))).toMatchObject({
      status: 404,
      body: 'no such path',
    });
    expect(ok<{ bodyBase64: string }>(await call(client, 'call_api', { apiId: weatherApi, path: '/image' })).bodyBase64).toBe(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]).toString('base64'),
    );

    expect(ok<{ balance: number }>(await call(client, 'get_balance'))).toEqual({ ok: true, balance: 0.984 });
    const ledger = await app.deps.sql<{ kind: string; amount_micros: string; api_id: string | null }[]>`
      select kind, amount_micros::text, api_id from ledger_entries where account_id = ${agent.accountId} and kind = 'charge' order by seq`;
    expect(ledger.map((entry) => [entry.api_id, entry.amount_micros])).toEqual([
      [weatherApi, '-10000'],
      [weatherApi, '-2000'],
      [weatherApi, '-2000'],
      [weatherApi, '-2000'],
    ]);

    // Usage is aggregated by the worker, seconds behind the ledger at most.
    let usage: { totals: { calls: number; cost: number }; byApi: { apiId: string; calls: number }[] } | undefined;
    for (let attempt = 0; attempt < 100; attempt++) {
      usage = ok(await call(client, 'get_usage', { days: 1 }));
      if (usage!.totals.calls >= 4) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(usage!.totals).toMatchObject({ calls: 4, cost: 0.016 });
  });

  it('runs a cookbook session to its human step, and polls its events', async () => {
    const agent = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const client = await connect(agent.fullKey);
    const listed = ok<{ cookbooks: { id: string }[] }>(await call(client, 'list_cookbooks', { q: 'weather' }));
    expect(listed.cookbooks.map((cookbook) => cookbook.id)).toContain('weather-alert-sms');
    const cookbook = await call(client, 'get_cookbook', { id: 'weather-alert-sms' });
    expect(ok<{ cookbook: { slots: { name: string }[] } }>(cookbook).cookbook.slots.map((slot) => slot.name)).toEqual(
      expect.arrayContaining(['weather', 'sms']),
    );
    expect(cookbook._meta?.['agent-api-platform/charge']).toMatchObject({ cost: 0.005 });

    const idempotencyKey = uniqueId('start-');
    const started = ok<{ session: { sessionId: string; status: string } }>(
      await call(client, 'start_cookbook', { id: 'weather-alert-sms', selectedApis: { weather: weatherApi, sms: smsApi }, idempotencyKey }),
    );
    const again = ok<{ session: { sessionId: string } }>(
      await call(client, 'start_cookbook', { id: 'weather-alert-sms', selectedApis: { weather: weatherApi, sms: smsApi }, idempotencyKey }),
    );
    expect(again.session.sessionId).toBe(started.session.sessionId);
    const sessionId = started.session.sessionId;

    const step = ok<{ step: { stepId: string; kind: string } }>(await call(client, 'get_current_step', { sessionId }));
    expect(step.step).toMatchObject({ stepId: 'fetch-forecast', kind: 'agent' });
    ok(await call(client, 'complete_step', { sessionId, stepId: 'fetch-forecast', resultData: FORECAST }));
    const drafted = ok<{ session: { status: string; currentStep: string }; nextStep: { kind: string } }>(
      await call(client, 'complete_step', { sessionId, stepId: 'draft-message', resultData: DRAFT }),
    );
    expect(drafted.session).toMatchObject({ status: 'waiting_for_human', currentStep: 'approve-wording' });
    expect(drafted.nextStep.kind).toBe('human');

    // An agent cannot do the person's step.
    expect(toolError(await call(client, 'complete_step', { sessionId, stepId: 'approve-wording', resultData: { approved: true } }))).toMatchObject({
      status: 403,
    });

    const session = ok<{ session: { status: string; steps: { stepId: string; status: string }[] } }>(
      await call(client, 'get_session', { sessionId }),
    );
    expect(session.session.steps.map((s) => s.status)).toEqual(['completed', 'completed', 'pending', 'upcoming']);
    expect(ok<{ sessions: { sessionId: string }[] }>(await call(client, 'list_sessions')).sessions.map((s) => s.sessionId)).toContain(sessionId);

    // Polling: everything up to the pending human step, then nothing new after the last id.
    let page = ok<{ events: { id: string; event: string }[]; lastEventId: string; ended: boolean }>(
      await call(client, 'get_session_events', { sessionId }),
    );
    for (let attempt = 0; attempt < 50 && !page.events.some((e) => e.event === 'human_step.pending'); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      page = ok(await call(client, 'get_session_events', { sessionId }));
    }
    expect(page.events.map((e) => e.event)).toEqual([
      'session.started',
      'step.started',
      'step.completed',
      'step.started',
      'step.completed',
      'step.started',
      'human_step.pending',
    ]);
    expect(page.ended).toBe(false);
    const later = ok<{ events: unknown[]; lastEventId: string }>(
      await call(client, 'get_session_events', { sessionId, afterEventId: page.lastEventId }),
    );
    expect(later).toMatchObject({ events: [], lastEventId: page.lastEventId });
    const second = ok<{ events: { id: string }[] }>(await call(client, 'get_session_events', { sessionId, afterEventId: '2-0', limit: 2 }));
    expect(second.events.map((e) => e.id)).toEqual(['3-0', '4-0']);
  });

  it('answers refusals as tool errors carrying the platform error code and hint (402 with balance and cost)', async () => {
    const broke = await createTestAccount(app.deps.sql);
    const client = await connect(broke.fullKey);
    const refused = toolError(await call(client, 'get_api_instructions', { id: weatherApi }));
    expect(refused).toMatchObject({ status: 402, code: 'insufficient_balance', balance: 0, cost: 0.01, hint: expect.any(String) });
    expect(toolError(await call(client, 'call_api', { apiId: weatherApi, path: '/forecast' }))).toMatchObject({
      status: 402,
      code: 'insufficient_balance',
    });
    expect(toolError(await call(client, 'get_api', { id: 'no such api!' }))).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(toolError(await call(client, 'get_api', { id: uniqueId('missing-') }))).toMatchObject({
      status: 404,
      code: 'not_found',
      hint: expect.any(String),
    });
    expect(toolError(await call(client, 'discover_apis', {}))).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(toolError(await call(client, 'call_api', { apiId: weatherApi, path: '/x?y=1' }))).toMatchObject({
      status: 400,
      code: 'validation_failed',
    });
    expect(toolError(await call(client, 'call_api', { apiId: weatherApi, headers: { Authorization: 'Bearer other' } }))).toMatchObject({
      status: 400,
      code: 'validation_failed',
    });
    expect(toolError(await call(client, 'get_session', { sessionId: 'ses_000000000000000000000000' }))).toMatchObject({ status: 404 });
    // maxCost: the price is above it, nothing is charged.
    const rich = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const richClient = await connect(rich.fullKey);
    expect(toolError(await call(richClient, 'get_api_instructions', { id: weatherApi, maxCost: 0.001 }))).toMatchObject({
      code: 'max_cost_exceeded',
    });
    expect(ok<{ balance: number }>(await call(richClient, 'get_balance')).balance).toBe(1);
  });

  it('shows an agent key only what its permissions allow', async () => {
    const owner = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const limited = await createKey(app.deps.sql, { accountId: owner.accountId, kind: 'agent', name: 'weather only', allowedApis: [weatherApi] });
    const none = await createKey(app.deps.sql, { accountId: owner.accountId, kind: 'agent', name: 'no apis', allowedApis: [] });

    const limitedClient = await connect(limited.fullKey);
    const callApi = (await limitedClient.listTools()).tools.find((tool) => tool.name === 'call_api')!;
    expect(callApi.inputSchema.properties?.apiId).toMatchObject({ enum: [weatherApi] });
    expect(ok<{ status: number }>(await call(limitedClient, 'call_api', { apiId: weatherApi, path: '/forecast' })).status).toBe(200);
    expect(toolError(await call(limitedClient, 'call_api', { apiId: smsApi, path: '/send' }))).toMatchObject({ code: 'validation_failed' });
    // The REST route's own refusal stands behind the tool's: an API outside the list is refused there too.
    expect(toolError(await call(limitedClient, 'get_api_instructions', { id: smsApi }))).toMatchObject({ status: 403, code: 'api_not_allowed' });

    const noneClient = await connect(none.fullKey);
    expect((await noneClient.listTools()).tools.map((tool) => tool.name)).not.toContain('call_api');
  });

  it('refuses a missing or bad key with 401 and a Bearer challenge, publishes its resource metadata, and checks Origin', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const post = (headers: Record<string, string>) =>
      fetch(`${edge}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(init),
      });

    // Refusals are JSON-RPC errors any MCP client can read, carrying the platform's code and hint; the status stays.
    const missing = await post({});
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${app.deps.settings.PUBLIC_URL.replace(/\/$/, '')}/.well-known/oauth-protected-resource/mcp", scope="mcp"`,
    );
    // (Refused before the body is read, so the request's id is unknown: null, as JSON-RPC says.)
    expect(await missing.json()).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32001,
        message: expect.stringMatching(/^missing_credentials: /),
        data: { status: 401, ok: false, code: 'missing_credentials', hint: expect.any(String) },
      },
    });
    const bad = await post({ authorization: 'Bearer service_sk_000000000000000000000000000000000000000000000000' });
    expect(bad.status).toBe(401);
    // RFC 6750: a token was presented and is no good.
    expect(bad.headers.get('www-authenticate')).toMatch(
      /^Bearer resource_metadata="[^"]+", scope="mcp", error="invalid_token", error_description="[^"]+"$/,
    );
    expect(await bad.json()).toMatchObject({ error: { code: -32001, data: { code: 'invalid_key' } } });

    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const metadata = await fetch(`${edge}${path}`);
      expect(metadata.status).toBe(200);
      expect(await metadata.json()).toMatchObject({
        resource: expect.stringMatching(/\/mcp$/),
        bearer_methods_supported: ['header'],
        'x-api-key': { scheme: 'Authorization: Bearer <key>' },
      });
    }

    const foreign = await post({ authorization: `Bearer ${account.fullKey}`, origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toMatchObject({ error: { data: { code: 'forbidden' } } });
    // The router takes /%6Dcp (and /mcp/) for /mcp: the Origin check goes by the route, so they are refused alike (finding 12's class).
    for (const path of ['/%6Dcp', '/%6dcp', '/mcp/']) {
      const spelled = await fetch(`${edge}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${account.fullKey}`,
          origin: 'https://evil.example',
        },
        body: JSON.stringify(init),
      });
      expect(spelled.status, `${path}: ${await spelled.clone().text()}`).toBe(403);
    }
    const own = await post({ authorization: `Bearer ${account.fullKey}`, origin: new URL(app.deps.settings.PUBLIC_URL).origin });
    expect(own.status).not.toBe(403);
  });

  it("tells the official client why a revoked key is refused: the platform's code is in the error it gets", async () => {
    const owner = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const { key, fullKey } = await createKey(app.deps.sql, { accountId: owner.accountId, kind: 'api', name: 'soon revoked' });
    const client = await connect(fullKey);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    const revoke = await app.inject({ method: 'DELETE', url: `/api/v1/keys/${key.id}`, headers: { authorization: `Bearer ${owner.fullKey}` } });
    expect(revoke.statusCode, revoke.body).toBeLessThan(300);
    // The revocation reaches every edge's key cache through Redis within moments.
    const refusal = () =>
      client.listTools().then(
        () => '',
        (caught: unknown) => (caught as Error).message,
      );
    await expect.poll(refusal, { timeout: 3_000, interval: 100 }).toContain('key_revoked');
  });

  it('serves 2025-era clients through the stateless fallback, with the same tools', async () => {
    const client = await connect(account.fullKey, 'legacy');
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('discover_apis');
    expect(ok<{ balance: number }>(await call(client, 'get_balance')).balance).toBe(1);
  });
});
