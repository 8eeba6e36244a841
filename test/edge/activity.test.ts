import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactCallPath, type ActivityEntry } from '#core/billing';
import { createRedis } from '#core/platform';
import { createKey } from '#db/keys';
import { usageProcessor } from '#workers/queues/usage';
import { describeAuthCases } from '../helpers/auth-cases.js';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// The activity log against the ledger: real proxied calls to a local upstream (served, an upstream
// 404 that keeps its cost, an upstream 500 that is refunded), recorded by the real usage worker.

type Entry = ActivityEntry;
interface Page {
  activity: Entry[];
  nextCursor: string | null;
}

const SECRET = 'sk_live_4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c';

describe('GET /api/v1/activity', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let worker: Worker;
  let apiId: string;
  let otherApi: string;
  let account: TestAccount;
  let agentKey: { id: string; fullKey: string };

  const get = (url: string, key: string) => app.inject({ method: 'GET', url, headers: bearer(key) });
  const proxy = (key: string, path: string, api = apiId, method = 'GET') =>
    rawRequest(edge, { method, path: `/api/v1/proxy/${api}${path}`, headers: bearer(key) });
  /** Polls the activity until it holds `n` entries (the usage worker writes them a moment later). */
  async function activityOf(key: string, n: number, query = ''): Promise<Entry[]> {
    await app.usage.flush();
    let page = expectOk<Page>(await get(`/api/v1/activity?limit=200${query}`, key));
    const deadline = Date.now() + 15_000;
    while (page.activity.length < n && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      page = expectOk<Page>(await get(`/api/v1/activity?limit=200${query}`, key));
    }
    expect(page.activity, JSON.stringify(page)).toHaveLength(n);
    return page.activity;
  }

  beforeAll(async () => {
    const prefix = uniqueId('activity');
    upstream = await startUpstream((req, res) => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      if (path.startsWith('/boom')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('database exploded');
      } else if (path.startsWith('/missing')) {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('no such thing');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"hello":"world"}');
      }
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, USAGE_FLUSH_MS: '20' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix, concurrency: 2 });
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    otherApi = await registerApi({ baseUrl: upstream.url, price: '0.001' });

    account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const agent = await createKey(app.deps.sql, { accountId: account.accountId, kind: 'agent', name: 'the agent' });
    agentKey = { id: agent.key.id, fullKey: agent.fullKey };
    // In order, so newest first is the reverse: served, failed (upstream 404), refunded (upstream 500),
    // a served call whose path and query carry a secret, one to another API, one by the agent key.
    expect((await proxy(account.fullKey, '/ok')).status).toBe(200);
    expect((await proxy(account.fullKey, '/missing')).status).toBe(404);
    expect((await proxy(account.fullKey, '/boom')).status).toBe(502);
    expect((await proxy(account.fullKey, `/keys/${SECRET}/items/42?api_key=${SECRET}&q=1`)).status).toBe(200);
    expect((await proxy(account.fullKey, '/ok', otherApi, 'POST')).status).toBe(200);
    expect((await proxy(agentKey.fullKey, '/ok')).status).toBe(200);
    await activityOf(account.fullKey, 6);
  }, 60_000);
  afterAll(async () => {
    await worker?.close();
    await app?.close();
    await workerRedis?.quit();
    await upstream?.close();
  });

  it('lists every metered call newest first, served, failed and refunded, and each agrees with the ledger', async () => {
    const entries = await activityOf(account.fullKey, 6);
    // Newest first: at never increases down the list.
    for (let i = 1; i < entries.length; i += 1) expect(entries[i - 1]!.at >= entries[i]!.at).toBe(true);
    const [agentCall, posted, secret, refunded, failed, served] = entries;

    expect(served).toMatchObject({
      apiId,
      item: 'proxy',
      method: 'GET',
      path: '/ok',
      status: 200,
      outcome: 'served',
      errorCode: null,
      hint: null,
      cost: 0.002,
      costMicros: '2000',
      charged: 0.002,
      chargedMicros: '2000',
      refund: 0,
      refundMicros: '0',
      refundPending: false,
      refundId: null,
      paidWith: 'balance',
      key: { id: account.keyId, kind: 'api', name: 'test key' },
    });
    expect(served!.latencyMs).toBeGreaterThanOrEqual(0);
    expect(served!.bytesOut).toBe('{"hello":"world"}'.length);
    expect(served!.key!.prefix).toMatch(/^service_sk_[0-9a-f]{8}$/);

    // The upstream's own 404: the call kept its cost, with a hint for whoever reads it.
    expect(failed).toMatchObject({ path: '/missing', status: 404, outcome: 'failed', errorCode: null, costMicros: '2000', refundId: null });
    expect(failed!.hint).toContain('404');

    // The upstream's 500: charged, then refunded by a ledger entry of its own.
    expect(refunded).toMatchObject({
      path: '/boom',
      status: 502,
      outcome: 'refunded',
      errorCode: 'upstream_error',
      cost: 0,
      costMicros: '0',
      charged: 0.002,
      chargedMicros: '2000',
      refund: 0.002,
      refundMicros: '2000',
      refundPending: false,
    });
    expect(refunded!.hint).toContain('refunded');

    expect(posted).toMatchObject({ apiId: otherApi, method: 'POST', path: '/ok', costMicros: '1000' });
    expect(agentCall).toMatchObject({ key: { id: agentKey.id, kind: 'agent', name: 'the agent' }, outcome: 'served' });

    // Neither the query string nor the key-like path segment is kept, here or in the table.
    expect(secret!.path).toBe('/keys/{redacted}/items/42');
    const stored = await app.deps.sql<{ path: string }[]>`select path from usage_events where account_id = ${account.accountId}`;
    expect(JSON.stringify(stored)).not.toContain(SECRET);
    expect(JSON.stringify(entries)).not.toContain(SECRET);
    expect(JSON.stringify(entries)).not.toContain(account.fullKey);
    expect(JSON.stringify(entries)).not.toContain(agentKey.fullKey);

    // Each call's charge and refund are the ledger's.
    const ledger = await app.deps.sql<{ id: string; kind: string; amount_micros: bigint; refund_of: string | null }[]>`
      select id, kind, amount_micros, refund_of from ledger_entries where account_id = ${account.accountId} and kind in ('charge', 'refund')`;
    for (const entry of entries) {
      const charge = ledger.find((row) => row.id === entry.chargeId);
      expect(charge, JSON.stringify(entry)).toMatchObject({ kind: 'charge', amount_micros: -BigInt(entry.chargedMicros) });
    }
    const refund = ledger.find((row) => row.kind === 'refund');
    expect(refund).toMatchObject({ id: refunded!.refundId, refund_of: refunded!.chargeId, amount_micros: 2_000n });
    const net = ledger.reduce((sum, row) => sum - row.amount_micros, 0n);
    expect(entries.reduce((sum, entry) => sum + BigInt(entry.costMicros), 0n)).toBe(net);
  });

  it('pages with an opaque cursor, each call once, and bounds the page size', async () => {
    const all = await activityOf(account.fullKey, 6);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const url: string = `/api/v1/activity?limit=4${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page: Page = expectOk<Page>(await get(url, account.fullKey));
      expect(page.activity.length).toBeLessThanOrEqual(4);
      seen.push(...page.activity.map((entry) => entry.id));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor && pages < 10);
    expect(pages).toBe(2);
    expect(seen).toEqual(all.map((entry) => entry.id));
    expect(expectOk<Page>(await get('/api/v1/activity?limit=6', account.fullKey)).nextCursor).toBeNull();
    expect(expectOk<Page>(await get('/api/v1/activity', account.fullKey)).activity).toHaveLength(6);
  });

  it('filters by outcome, API, key, status and time', async () => {
    const all = await activityOf(account.fullKey, 6);
    const ids = (entries: Entry[]) => entries.map((entry) => entry.id);
    expect((await activityOf(account.fullKey, 1, '&outcome=refunded'))[0]!.path).toBe('/boom');
    expect((await activityOf(account.fullKey, 1, '&outcome=failed'))[0]!.status).toBe(404);
    expect(await activityOf(account.fullKey, 4, '&outcome=served')).toHaveLength(4);
    expect(ids(await activityOf(account.fullKey, 1, `&api=${otherApi}`))).toEqual(ids(all.filter((e) => e.apiId === otherApi)));
    expect((await activityOf(account.fullKey, 1, `&key=${agentKey.id}`))[0]!.key!.id).toBe(agentKey.id);
    expect((await activityOf(account.fullKey, 1, '&status=404'))[0]!.path).toBe('/missing');
    expect((await activityOf(account.fullKey, 1, '&status=5xx'))[0]!.outcome).toBe('refunded');
    expect(await activityOf(account.fullKey, 4, '&status=2xx')).toHaveLength(4);
    // Time: since inclusive, until exclusive.
    const oldest = all[all.length - 1]!;
    expect(await activityOf(account.fullKey, 6, `&since=${encodeURIComponent(oldest.at)}`)).toHaveLength(6);
    expect(await activityOf(account.fullKey, 0, `&until=${encodeURIComponent(oldest.at)}`)).toHaveLength(0);
    expect(await activityOf(account.fullKey, 0, '&since=2999-01-01')).toHaveLength(0);
    expect(await activityOf(account.fullKey, 6, '&since=2020-01-01&until=2999-01-01T00:00:00Z')).toHaveLength(6);
  });

  it('finds a call by the request id its answer carried, the platform’s or the caller’s own', async () => {
    // An account of its own: the other tests count this file's six calls.
    const caller = await createTestAccount(app.deps.sql, { balanceMicros: 100_000n });
    const ours = await proxy(caller.fullKey, '/ok');
    const given = uniqueId('req');
    const theirs = await rawRequest(edge, {
      method: 'GET',
      path: `/api/v1/proxy/${apiId}/boom`,
      headers: { ...bearer(caller.fullKey), 'x-request-id': given },
    });
    expect(ours.status).toBe(200);
    expect(theirs.status).toBe(502);
    const ourId = String(ours.headers['x-request-id']);
    expect(ourId).toMatch(/^[0-9a-f-]{36}$/);
    expect(theirs.headers['x-request-id']).toBe(given);
    const both = await activityOf(caller.fullKey, 2);
    expect(both.map((entry) => entry.requestId).sort()).toEqual([ourId, given].sort());

    const [served] = await activityOf(caller.fullKey, 1, `&requestId=${ourId}`);
    expect(served).toMatchObject({ requestId: ourId, path: '/ok', outcome: 'served' });
    const [refunded] = await activityOf(caller.fullKey, 1, `&requestId=${given}`);
    expect(refunded).toMatchObject({ requestId: given, path: '/boom', outcome: 'refunded' });
    // Another account's request id finds nothing here, and this one's nothing there.
    const [oneOfTheFirst] = await activityOf(account.fullKey, 6);
    expect(oneOfTheFirst!.requestId).toMatch(/^[0-9a-f-]{36}$/);
    await activityOf(caller.fullKey, 0, `&requestId=${oneOfTheFirst!.requestId}`);
    await activityOf(account.fullKey, 0, `&requestId=${given}`);
    const stored = await app.deps.sql<{ request_id: string }[]>`select request_id from usage_events where account_id = ${caller.accountId}`;
    expect(stored.map((row) => row.request_id).sort()).toEqual([ourId, given].sort());

    const body = expectError(await get('/api/v1/activity?requestId=not%20an%20id', caller.fullKey), 400, 'validation_failed');
    expect(JSON.stringify(body)).toContain('requestId');
  });

  it("shows an agent key its own calls only, and another account none of this one's", async () => {
    const own = expectOk<Page>(await get('/api/v1/activity', agentKey.fullKey)).activity;
    expect(own.map((entry) => entry.key?.id)).toEqual([agentKey.id]);
    expectError(await get(`/api/v1/activity?key=${account.keyId}`, agentKey.fullKey), 403, 'agent_key_forbidden');
    expect(expectOk<Page>(await get(`/api/v1/activity?key=${agentKey.id}`, agentKey.fullKey)).activity).toHaveLength(1);

    const other = await createTestAccount(app.deps.sql, { balanceMicros: 100_000n });
    expect(expectOk<Page>(await get('/api/v1/activity', other.fullKey))).toEqual({ ok: true, activity: [], nextCursor: null });
    expect(expectOk<Page>(await get(`/api/v1/activity?key=${account.keyId}`, other.fullKey)).activity).toEqual([]);
  });

  it('answers bad input with 400 in the one error shape', async () => {
    const bad = async (query: string, field: string) => {
      const body = expectError(await get(`/api/v1/activity?${query}`, account.fullKey), 400, 'validation_failed');
      expect(JSON.stringify(body)).toContain(field);
    };
    await bad('limit=0', 'limit');
    await bad('limit=201', 'limit');
    await bad('limit=ten', 'limit');
    await bad('outcome=charged', 'outcome');
    await bad('status=600', 'status');
    await bad('status=4x', 'status');
    await bad('since=yesterday', 'since');
    await bad('until=2026-13-45', 'until');
    await bad('api=not%20an%20id', 'api');
    await bad('cursor=not-a-cursor', 'cursor');
    await bad(`cursor=${Buffer.from('["s","12"]').toString('base64url')}`, 'cursor');
    await bad('since=2026-02-01&until=2026-01-01', 'since');
  });

  it('follows new calls over server-sent events', async () => {
    const controller = new AbortController();
    const res = await fetch(`${edge}/api/v1/activity/stream?outcome=refunded`, { headers: bearer(account.fullKey), signal: controller.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Wait for the stream's opening comment, then make a served call (filtered out) and a refunded one.
    while (!text.includes(': activity')) text += decoder.decode((await reader.read()).value, { stream: true });
    expect((await proxy(account.fullKey, '/ok')).status).toBe(200);
    expect((await proxy(account.fullKey, '/boom/again')).status).toBe(502);
    await app.usage.flush();
    const deadline = Date.now() + 15_000;
    // One read in flight at a time: a read left behind by a timeout would take the next chunk with it.
    let pending = reader.read();
    while (!text.includes('event: call') && Date.now() < deadline) {
      const chunk = await Promise.race([pending, new Promise<null>((resolve) => setTimeout(() => resolve(null), 500))]);
      if (chunk === null) continue;
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
      pending = reader.read();
    }
    // The read still in flight ends with the abort.
    pending.catch(() => {});
    controller.abort();
    const frames = text.split('\n\n').filter((frame) => frame.includes('event: call'));
    expect(frames, text).toHaveLength(1);
    const data = JSON.parse(/data: (.*)/.exec(frames[0]!)![1]!) as Entry;
    expect(data).toMatchObject({ path: '/boom/again', outcome: 'refunded', errorCode: 'upstream_error' });
    expect(frames[0]).toContain(`id: ${data.id}`);
    // The stream's filters are checked like the list's.
    expectError(await get('/api/v1/activity/stream?outcome=nope', account.fullKey), 400, 'validation_failed');
  });

  it('is the get_activity MCP tool, with the same entries and errors', async () => {
    const client = new Client({ name: 'activity-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => account.fullKey } }));
    try {
      const result = (await client.callTool({ name: 'get_activity', arguments: { outcome: 'refunded', limit: 1 } })) as CallToolResult;
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false);
      const page = result.structuredContent as Page & { ok: true };
      expect(page.activity).toHaveLength(1);
      expect(page.activity[0]).toMatchObject({ outcome: 'refunded', errorCode: 'upstream_error', costMicros: '0' });
      expect(page.nextCursor).not.toBeNull();
      const bad = (await client.callTool({ name: 'get_activity', arguments: { outcome: 'charged' } })) as CallToolResult;
      expect(bad.isError).toBe(true);
      expect((bad.content[0] as { text: string }).text).toContain('validation_failed');
    } finally {
      await client.close();
    }
  });

  it('keeps the id of the POST /mcp request with a call_api call, returns it, and finds the call by it', async () => {
    const caller = await createTestAccount(app.deps.sql, { balanceMicros: 100_000n });
    const client = new Client({ name: 'activity-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => caller.fullKey } }));
    try {
      const called = (await client.callTool({ name: 'call_api', arguments: { apiId, method: 'GET', path: '/ok' } })) as CallToolResult;
      expect(called.isError ?? false, JSON.stringify(called.content)).toBe(false);
      // call_api says which request carried it; the activity finds the call by it.
      const requestId = (called.structuredContent as { requestId?: string }).requestId;
      expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
      const [entry] = await activityOf(caller.fullKey, 1);
      expect(entry!.requestId).toBe(requestId);
      const found = await activityOf(caller.fullKey, 1, `&requestId=${requestId}`);
      expect(found[0]!.id).toBe(entry!.id);
    } finally {
      await client.close();
    }
  });
});

describe('redactCallPath', () => {
  it('keeps ids and words, masks key-like segments, drops the query and bounds the length', () => {
    expect(redactCallPath('/v1/users/42/orders')).toBe('/v1/users/42/orders');
    expect(redactCallPath('/v1/items/0b4d5c3e-8f1a-4b2c-9d3e-5f6a7b8c9d0e')).toBe('/v1/items/0b4d5c3e-8f1a-4b2c-9d3e-5f6a7b8c9d0e');
    expect(redactCallPath(`/bot${'1'.repeat(10)}:AAH${'x9'.repeat(15)}/sendMessage`)).toBe('/{redacted}/sendMessage');
    expect(redactCallPath('/v1/ghp_abcdef123456/x')).toBe('/v1/{redacted}/x');
    expect(redactCallPath('/search?q=secret&key=abc')).toBe('/search');
    expect(redactCallPath('/a#frag')).toBe('/a');
    expect(redactCallPath(`/${'word/'.repeat(100)}`)!.length).toBe(256);
    expect(redactCallPath('')).toBe('/');
    expect(redactCallPath(null)).toBeNull();
  });
});

describeAuthCases({ app: () => authApp, method: 'GET', url: '/api/v1/activity' });
let authApp: FastifyInstance;
beforeAll(async () => {
  authApp = await createTestApp({ REDIS_PREFIX: uniqueId('activityauth') });
});
afterAll(async () => {
  await authApp?.close();
});
