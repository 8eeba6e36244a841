import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '#db/keys';
import { createTestAccount, createTestApp, expectError, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { bigPayload, rawRequest, registerApi, sha256, startUpstream, type RawResponse, type TestUpstream } from '../helpers/upstream.js';

const BIG = 20 * 1024 * 1024;
const big = bigPayload(BIG, 7);

/** The test upstream: one behaviour per path (below its /base prefix). */
async function upstreamHandler(req: IncomingMessage, res: ServerResponse, seen: { body: Buffer | null }) {
  const path = (req.url ?? '').split('?')[0] ?? '';
  const route = path.replace(/^\/base/, '');
  if (route.startsWith('/echo')) {
    res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/octet-stream', 'x-upstream': 'echo' });
    res.end(seen.body ?? Buffer.alloc(0));
  } else if (route === '/missing') {
    res.writeHead(404, { 'content-type': 'text/plain', 'x-upstream': 'yes' });
    res.end('no such thing');
  } else if (route === '/reject-key') {
    // Like many real APIs: a 401 quoting the rejected key, raw and URL-encoded, in a long body.
    const key = String(req.headers['x-api-key']);
    res.writeHead(401, { 'content-type': 'text/plain' });
    res.write(`invalid key ${key.slice(0, 5)}`);
    res.write(`${key.slice(5)}; `.padEnd(70_000, '.'));
    res.end(` again: ${encodeURIComponent(key)} end`);
  } else if (route === '/leak-key') {
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(`bad key ${String(req.headers['x-api-key'])}`);
  } else if (route === '/boom') {
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('database exploded');
  } else if (route === '/unavailable') {
    res.writeHead(503, { 'retry-after': '7' });
    res.end('maintenance');
  } else if (route === '/slow') {
    setTimeout(() => {
      if (!res.destroyed) res.end('late');
    }, 3_000).unref();
  } else if (route === '/late') {
    setTimeout(() => {
      if (!res.destroyed) res.end('late but in time');
    }, 300).unref();
  } else if (route === '/reset') {
    req.socket.destroy();
  } else if (route === '/midway') {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(Buffer.alloc(64 * 1024, 1));
    setTimeout(() => req.socket.destroy(), 50);
  } else if (route === '/big') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG) });
    for await (const chunk of big.chunks()) {
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
    }
    res.end();
  } else if (route === '/empty') {
    res.writeHead(204);
    res.end();
  } else {
    res.writeHead(200, {
      'content-type': 'application/json',
      'x-upstream': 'yes',
      'set-cookie': 'upstream=1',
      'x-service-balance': '1000000',
      connection: 'keep-alive',
    });
    res.end(JSON.stringify({ hello: 'world', url: req.url }));
  }
}

describe('the metered proxy', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let apiId: string;
  const PRICE = 2_000n;

  beforeAll(async () => {
    upstream = await startUpstream(upstreamHandler);
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('proxy'),
      PROXY_HEADERS_TIMEOUT_MS: '800',
      PROXY_BODY_TIMEOUT_MS: '2000',
      PROXY_RETRY_AFTER_SECONDS: '4',
      PROXY_BODY_LIMIT_BYTES: String(32 * 1024 * 1024),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    apiId = await registerApi({ baseUrl: `${upstream.url}/base`, price: '0.002', rules: ['POST /premium*=0.05'] });
  });
  afterAll(async () => {
    await app.close();
    await upstream.close();
  });

  const call = (
    account: TestAccount,
    method: string,
    path: string,
    extra: { headers?: Record<string, string | string[]>; body?: Buffer | string | AsyncIterable<Buffer>; api?: string } = {},
  ) =>
    rawRequest(edge, {
      method,
      path: `/api/v1/proxy/${extra.api ?? apiId}${path}`,
      headers: { authorization: `Bearer ${account.fullKey}`, ...extra.headers },
      body: extra.body,
    });
  const json = (res: RawResponse) => JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
  const seenSince = (n: number) => upstream.seen.slice(n);
  const ledger = (accountId: string) =>
    app.deps.sql<{ id: string; kind: string; amount_micros: bigint; refund_of: string | null; api_id: string | null }[]>`
      select id, kind, amount_micros, refund_of, api_id from ledger_entries where account_id = ${accountId} order by seq`;
  const balanceOf = async (accountId: string) =>
    (await app.deps.sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${accountId}`)[0]!.b;
  const funded = () => createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });

  it('forwards path, query and method unchanged, charges, and sets the cost headers', async () => {
    const account = await funded();
    const res = await call(account, 'GET', '/things/a%20b/c;v=1/%7Euser?z=%41&z=2&empty=&plus=a+b&sp=%20');
    expect(res.status, res.body.toString()).toBe(200);
    // The path is forwarded in its canonical form (an escaped unreserved character decoded, see
    // canonicalPath); the query is forwarded exactly as sent.
    expect(json(res)).toMatchObject({ hello: 'world', url: '/base/things/a%20b/c;v=1/~user?z=%41&z=2&empty=&plus=a+b&sp=%20' });
    expect(res.headers['x-service-cost']).toBe('0.002');
    expect(res.headers['x-service-balance']).toBe('0.998');
    expect(res.headers['x-service-api']).toBe(apiId);
    expect(res.headers['x-upstream']).toBe('yes');
    expect(res.headers['set-cookie'], 'upstream cookies are not set on the platform domain').toBeUndefined();
    const entries = await ledger(account.accountId);
    const charge = entries.find((e) => e.kind === 'charge');
    expect(charge).toMatchObject({ id: res.headers['x-service-charge-id'], amount_micros: -PRICE, api_id: apiId });
    expect(await balanceOf(account.accountId)).toBe(1_000_000n - PRICE);
  });

  it('passes 4xx through unchanged and charges it; 204 stays empty', async () => {
    const account = await funded();
    const res = await call(account, 'GET', '/missing');
    expect(res.status).toBe(404);
    expect(res.body.toString()).toBe('no such thing');
    expect(res.headers['content-type']).toBe('text/plain');
    expect(res.headers['x-service-cost']).toBe('0.002');
    const empty = await call(account, 'DELETE', '/empty');
    expect(empty.status).toBe(204);
    expect(empty.body.length).toBe(0);
    expect(await balanceOf(account.accountId)).toBe(1_000_000n - 2n * PRICE);
  });

  it('maps an upstream 5xx to 502 with the downstream error, refunded by an entry that references the charge', async () => {
    const account = await funded();
    const res = await call(account, 'POST', '/boom', { headers: { 'content-type': 'application/json' }, body: '{}' });
    const body = expectError({ statusCode: res.status, body: res.body.toString() }, 502, 'upstream_error');
    expect(body.upstream).toEqual({ status: 500, body: 'database exploded' });
    expect(body.refundId).toBe(res.headers['x-service-refund-id']);
    expect(res.headers['x-service-cost']).toBe('0');
    expect(res.headers['x-service-balance']).toBe('1');
    const entries = await ledger(account.accountId);
    const charge = entries.find((e) => e.kind === 'charge')!;
    expect(charge.id).toBe(res.headers['x-service-charge-id']);
    expect(entries.find((e) => e.kind === 'refund')).toMatchObject({ id: body.refundId, refund_of: charge.id, amount_micros: PRICE });
    expect(await balanceOf(account.accountId)).toBe(1_000_000n);
  });

  it('maps 503, a timeout, a reset connection and an unreachable upstream to a refunded 503 with Retry-After', async () => {
    const account = await funded();
    const unavailable = await call(account, 'GET', '/unavailable');
    const body = expectError({ statusCode: unavailable.status, body: unavailable.body.toString() }, 503, 'upstream_unavailable');
    expect(unavailable.headers['retry-after']).toBe('7');
    expect(body.upstream).toEqual({ status: 503, body: 'maintenance' });

    const started = Date.now();
    const slow = await call(account, 'GET', '/slow');
    expectError({ statusCode: slow.status, body: slow.body.toString() }, 503, 'upstream_unavailable');
    expect(Date.now() - started).toBeLessThan(2_500);
    expect(slow.headers['retry-after']).toBe('4');

    const reset = await call(account, 'GET', '/reset');
    expectError({ statusCode: reset.status, body: reset.body.toString() }, 503, 'upstream_unavailable');

    const closed = await startUpstream();
    await closed.close();
    const deadId = await registerApi({ baseUrl: closed.url, price: '0.002' });
    const unreachable = await call(account, 'GET', '/x', { api: deadId });
    expectError({ statusCode: unreachable.status, body: unreachable.body.toString() }, 503, 'upstream_unavailable');

    for (const res of [unavailable, slow, reset, unreachable]) expect(res.headers['x-service-refund-id']).toBeTruthy();
    const entries = await ledger(account.accountId);
    expect(entries.filter((e) => e.kind === 'charge').length).toBe(4);
    expect(entries.filter((e) => e.kind === 'refund').length).toBe(4);
    expect(await balanceOf(account.accountId)).toBe(1_000_000n);
  });

  it('aborts the response when the upstream closes mid-body, and refunds the charge', async () => {
    const account = await funded();
    const res = await call(account, 'GET', '/midway');
    expect(res.status).toBe(200);
    expect(res.aborted).toBe(true);
    expect(res.body.length).toBeLessThan(64 * 1024 + 1);
    await expect.poll(async () => (await ledger(account.accountId)).filter((e) => e.kind === 'refund').length, { timeout: 3_000 }).toBe(1);
    expect(await balanceOf(account.accountId)).toBe(1_000_000n);
  });

  it('streams 20 MB both ways byte-exactly', async () => {
    const account = await funded();
    const down = await call(account, 'GET', '/big');
    expect(down.status).toBe(200);
    expect(down.body.length).toBe(BIG);
    expect(sha256(down.body)).toBe(big.sha256);

    const before = upstream.seen.length;
    const up = await call(account, 'PUT', '/upload', { headers: { 'content-type': 'application/octet-stream' }, body: big.chunks() });
    expect(up.status, up.body.toString()).toBe(200);
    const seen = seenSince(before)[0]!;
    expect(seen.bodyBytes).toBe(BIG);
    expect(seen.bodySha256).toBe(big.sha256);
    expect(seen.headers['transfer-encoding']).toBe('chunked');
  });

  it('keeps the charge when the caller hangs up mid-download', async () => {
    const account = await funded();
    const { request } = await import('node:http');
    const got = await new Promise<number>((resolve, reject) => {
      const req = request(`${edge}/api/v1/proxy/${apiId}/big`, { headers: { 'x-api-key': account.fullKey }, agent: false }, (res) => {
        res.once('data', (chunk: Buffer) => {
          req.destroy();
          resolve(chunk.length);
        });
      });
      req.on('error', () => {});
      req.on('close', () => resolve(-1));
      req.end();
      setTimeout(() => reject(new Error('no data')), 5_000).unref();
    });
    expect(got).toBeGreaterThan(0);
    // Asserting an absence: give the edge a moment to notice the hang-up and settle the call.
    await new Promise((r) => setTimeout(r, 300));
    const entries = await ledger(account.accountId);
    expect(entries.map((e) => e.kind)).toEqual(['adjustment', 'charge']);
  });

  it('keeps the charge and records the call when the caller hangs up before the upstream answers', async () => {
    const account = await funded();
    const { request } = await import('node:http');
    const req = request(`${edge}/api/v1/proxy/${apiId}/late`, { headers: { 'x-api-key': account.fullKey }, agent: false });
    req.on('error', () => {});
    req.end();
    await new Promise((r) => setTimeout(r, 100));
    req.destroy();
    // The upstream answers 200 after 300 ms, to a caller already gone.
    await expect
      .poll(async () => (await ledger(account.accountId)).map((e) => e.kind), { timeout: 3_000, interval: 50 })
      .toEqual(['adjustment', 'charge']);
    const chargeId = (await ledger(account.accountId))[1]!.id;
    // Its usage event is handed over once the upstream answered, with the upstream's status and the
    // charge (without one the reconciler would refund a call the upstream served).
    const eventsOfCharge = async () => {
      await app.usage.flush();
      const jobs = await app.usage.queue.getJobs(['waiting', 'active', 'completed', 'delayed']);
      return jobs
        .flatMap((job) => (job.data as { events: Array<{ chargeId: string | null; status: number; costMicros: string }> }).events)
        .filter((e) => e.chargeId === chargeId);
    };
    await expect
      .poll(eventsOfCharge, { timeout: 3_000, interval: 100 })
      .toEqual([expect.objectContaining({ status: 200, costMicros: PRICE.toString() })]);
    // And the edge goes on serving.
    expect((await call(account, 'GET', '/hello')).status).toBe(200);
  });

  it('forwards a GET body as well', async () => {
    const account = await funded();
    const before = upstream.seen.length;
    const res = await call(account, 'GET', '/echo?x=1', { headers: { 'content-type': 'application/json' }, body: '{"query": 1}' });
    expect(res.status).toBe(200);
    expect(seenSince(before)[0]!.body?.toString()).toBe('{"query": 1}');
    expect(res.body.toString()).toBe('{"query": 1}');
  });

  it('forwards odd bodies byte for byte, whatever their content type', async () => {
    const account = await funded();
    const binary = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));
    const cases: Array<[string, string, Buffer]> = [
      ['POST', 'application/octet-stream', binary],
      ['PUT', 'application/json', Buffer.from('{ "a" :1,  "a":2 ,"n": 1.0000000000000001 }\n')],
      ['PATCH', 'application/json', Buffer.from('{"not": valid json')],
      ['POST', 'text/plain; charset=latin1', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0d, 0x0a, 0x00, 0xff])],
      ['POST', 'application/x-www-form-urlencoded', Buffer.from('a=1&a=2&b=%ZZ&c')],
      ['DELETE', 'application/vnd.weird+xml', Buffer.from('<x>\u2603</x>')],
    ];
    for (const [method, type, payload] of cases) {
      const before = upstream.seen.length;
      const res = await call(account, method, '/echo', { headers: { 'content-type': type }, body: payload });
      expect(res.status, `${method} ${type}: ${res.body.toString()}`).toBe(200);
      const seen = seenSince(before)[0]!;
      expect(seen.method).toBe(method);
      expect(seen.headers['content-type']).toBe(type);
      expect(seen.body?.equals(payload), `${method} ${type} reached the upstream changed`).toBe(true);
      expect(res.body.equals(payload), `${method} ${type} came back changed`).toBe(true);
    }
  });

  it("keeps the caller's credentials, cookies, hop-by-hop and platform headers from the upstream", async () => {
    const account = await funded();
    const before = upstream.seen.length;
    const res = await rawRequest(edge, {
      method: 'POST',
      path: `/api/v1/proxy/${apiId}/echo`,
      headers: {
        'x-api-key': account.fullKey,
        cookie: 'session=secret-cookie',
        'x-csrf-token': 'csrf-secret',
        connection: 'keep-alive, x-hop-secret',
        'x-hop-secret': 'named-in-connection',
        'keep-alive': 'timeout=5',
        'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
        te: 'trailers',
        'x-max-cost': '1',
        'x-service-whatever': 'platform',
        'x-forwarded-for': '10.1.2.3',
        'x-custom': 'kept',
        'x-dup': ['one', 'two'],
        'content-type': 'text/plain',
      },
      body: 'hello',
    });
    expect(res.status, res.body.toString()).toBe(200);
    const seen = seenSince(before)[0]!;
    const names = Object.keys(seen.headers);
    for (const name of [
      'authorization',
      'x-api-key',
      'cookie',
      'x-csrf-token',
      'x-hop-secret',
      'keep-alive',
      'proxy-authorization',
      'te',
      'x-max-cost',
      'x-service-whatever',
      'x-forwarded-for',
    ]) {
      expect(names, `${name} reached the upstream`).not.toContain(name);
    }
    expect(JSON.stringify(seen.rawHeaders)).not.toContain(account.fullKey);
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['x-dup']).toBe('one, two');
    expect(seen.body?.toString()).toBe('hello');
  });

  it('injects the platform key per auth scheme, never the caller key', async () => {
    const account = await funded();
    const cases: Array<[string, (seen: TestUpstream['seen'][number]) => void]> = [
      ['header:X-Api-Key', (s) => expect(s.headers['x-api-key']).toBe('plat-secret-123456')],
      ['query:api_key', (s) => expect(s.url).toBe('/base/q?x=1&api_key=plat-secret-123456')],
      ['bearer', (s) => expect(s.headers.authorization).toBe('Bearer plat-secret-123456')],
      ['basic', (s) => expect(s.headers.authorization).toBe(`Basic ${Buffer.from('plat-secret-123456:').toString('base64')}`)],
      // The catalogue records cookie-borne keys (OpenAPI `in: cookie`); the proxy sends them as the
      // only cookie the upstream gets, never the caller's.
      ['cookie:sid', (s) => expect(s.headers.cookie).toBe('sid=plat-secret-123456')],
    ];
    for (const [auth, check] of cases) {
      const id = await registerApi({ baseUrl: `${upstream.url}/base`, price: '0.001', auth, platformKey: 'plat-secret-123456' });
      const before = upstream.seen.length;
      const res = await rawRequest(edge, {
        method: 'GET',
        path: `/api/v1/proxy/${id}/q?x=1&api_key=caller-sent`,
        headers: { 'x-api-key': account.fullKey, cookie: 'sid=caller-sent' },
      });
      expect(res.status, `${auth}: ${res.body.toString()}`).toBe(200);
      const seen = seenSince(before)[0]!;
      check(seen);
      expect(JSON.stringify(seen.rawHeaders) + seen.url).not.toContain(account.fullKey);
    }
    const leaky = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'header:X-Api-Key', platformKey: 'plat-secret-123456' });
    const leaked = await call(account, 'GET', '/leak-key', { api: leaky });
    expect(leaked.status).toBe(502);
    expect(leaked.body.toString()).not.toContain('plat-secret-123456');
    expect(json(leaked).upstream).toEqual({ status: 500, body: 'bad key [redacted]' });
    const rejected = await call(account, 'GET', '/reject-key', { api: leaky });
    expect(rejected.status).toBe(401);
    const text = rejected.body.toString();
    expect(text).not.toContain('plat-secret-123456');
    expect(text.startsWith('invalid key [redacted]; ')).toBe(true);
    expect(text.endsWith(' again: [redacted] end')).toBe(true);
    const keyless = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'bearer' });
    const before = upstream.seen.length;
    expectError(await asResponse(call(account, 'GET', '/x', { api: keyless })), 409, 'connection_required');
    expect(upstream.seen.length).toBe(before);
  });

  it('reaches the base URL itself, and a free API still reports cost and balance', async () => {
    const account = await funded();
    const free = await registerApi({ baseUrl: `${upstream.url}/base`, price: '0' });
    for (const [path, expected] of [
      ['', '/base'],
      ['/', '/base/'],
      ['?a=1', '/base?a=1'],
    ] as const) {
      const res = await call(account, 'GET', path, { api: free });
      expect(res.status, res.body.toString()).toBe(200);
      expect(json(res).url).toBe(expected);
      expect(res.headers['x-service-cost']).toBe('0');
      expect(res.headers['x-service-balance']).toBe('1');
      expect(res.headers['x-service-api']).toBe(free);
    }
  });

  it('prices by the first matching rule', async () => {
    const account = await funded();
    const res = await call(account, 'POST', '/premium/model', { body: 'x', headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(200);
    expect(res.headers['x-service-cost']).toBe('0.05');
    const plain = await call(account, 'GET', '/premium/model');
    expect(plain.headers['x-service-cost']).toBe('0.002');
  });

  it('refuses path escapes and odd api ids with 400, unknown APIs with 404, before charging or forwarding', async () => {
    const account = await funded();
    const before = upstream.seen.length;
    for (const path of [
      '/..',
      '/a/../../etc',
      '/%2e%2e/x',
      '/a/%2E./x',
      '/a/.',
      '/a%2fb',
      '/a%2Fb',
      '/a%5cb',
      '/a\\b',
      '//evil.example/x',
      '/a//b',
      '/http://evil.example/',
      '/%zz',
    ]) {
      const res = await call(account, 'GET', path);
      expectError({ statusCode: res.status, body: res.body.toString() }, 400, 'validation_failed');
    }
    expectError(
      await asResponse(rawRequest(edge, { method: 'GET', path: '/api/v1/proxy/Bad$Id/x', headers: { 'x-api-key': account.fullKey } })),
      400,
      'validation_failed',
    );
    expectError(
      await asResponse(rawRequest(edge, { method: 'GET', path: '/api/v1/proxy/no-such-api-here/x', headers: { 'x-api-key': account.fullKey } })),
      404,
      'not_found',
    );
    expectError(await asResponse(rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/x` })), 401, 'missing_credentials');
    expect(upstream.seen.length).toBe(before);
    expect(await balanceOf(account.accountId)).toBe(1_000_000n);
  });

  it('refuses a call above X-Max-Cost with nothing charged or forwarded', async () => {
    const account = await funded();
    const before = upstream.seen.length;
    const refused = await call(account, 'GET', '/x', { headers: { 'x-max-cost': '0.001' } });
    const body = expectError({ statusCode: refused.status, body: refused.body.toString() }, 409, 'max_cost_exceeded');
    expect(body).toMatchObject({ cost: 0.002, maxCost: 0.001 });
    expectError(await asResponse(call(account, 'GET', '/x', { headers: { 'x-max-cost': 'cheap' } })), 400, 'validation_failed');
    expect(upstream.seen.length).toBe(before);
    expect(await balanceOf(account.accountId)).toBe(1_000_000n);
    expect((await call(account, 'GET', '/x', { headers: { 'x-max-cost': '0.002' } })).status).toBe(200);
  });

  it('answers 402 with balance, cost and a payment hint, forwarding nothing', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000n });
    const before = upstream.seen.length;
    const res = await call(account, 'POST', '/x', { body: 'data', headers: { 'content-type': 'text/plain' } });
    const body = expectError({ statusCode: res.status, body: res.body.toString() }, 402, 'insufficient_balance');
    expect(body).toMatchObject({ balance: 0.001, cost: 0.002 });
    expect(body.hint).toContain('POST /api/v1/balance');
    expect(body.hint).toContain('x402');
    expect(upstream.seen.length).toBe(before);
  });

  it('holds agent keys to their allow-list and spend limit', async () => {
    const owner = await funded();
    const other = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    const { fullKey: allowedOnlyOther } = await createKey(app.deps.sql, {
      accountId: owner.accountId,
      kind: 'agent',
      name: 'a',
      allowedApis: [other],
    });
    const before = upstream.seen.length;
    const agent = { ...owner, fullKey: allowedOnlyOther };
    expectError(await asResponse(call(agent, 'GET', '/x')), 403, 'api_not_allowed');
    expect(upstream.seen.length).toBe(before);
    expect((await call(agent, 'GET', '/x', { api: other })).status).toBe(200);

    const { fullKey: limited } = await createKey(app.deps.sql, { accountId: owner.accountId, kind: 'agent', name: 'b', spendLimitMicros: 6_000n });
    const spender = { ...owner, fullKey: limited };
    expect((await call(spender, 'GET', '/x')).status).toBe(200);
    expect((await call(spender, 'GET', '/x')).status).toBe(200);
    // A refunded failure gives its spend back: 4,000 of 6,000 stays spent.
    expect((await call(spender, 'GET', '/boom')).status).toBe(502);
    expect((await call(spender, 'GET', '/x')).status).toBe(200);
    const beforeRefused = upstream.seen.length;
    const refused = expectError(await asResponse(call(spender, 'GET', '/x')), 403, 'spend_limit_exceeded');
    expect(refused).toMatchObject({ spendLimit: 0.006, spent: 0.006, cost: 0.002 });
    expect(upstream.seen.length).toBe(beforeRefused);
  });

  it('refuses bodies above the proxy limit with 413: before charging when declared, refunded when streamed', async () => {
    const small = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: uniqueId('proxy'), PROXY_BODY_LIMIT_BYTES: '4096' });
    try {
      await small.listen({ host: '127.0.0.1', port: 0 });
      const smallEdge = `http://127.0.0.1:${(small.server.address() as AddressInfo).port}`;
      const account = await funded();
      const declared = await rawRequest(smallEdge, {
        method: 'POST',
        path: `/api/v1/proxy/${apiId}/echo`,
        headers: { 'x-api-key': account.fullKey, 'content-type': 'application/octet-stream' },
        body: Buffer.alloc(5000, 1),
      });
      expectError({ statusCode: declared.status, body: declared.body.toString() }, 413, 'payload_too_large');
      expect(await balanceOf(account.accountId)).toBe(1_000_000n);
      const streamed = await rawRequest(smallEdge, {
        method: 'POST',
        path: `/api/v1/proxy/${apiId}/echo`,
        headers: { 'x-api-key': account.fullKey, 'content-type': 'application/octet-stream' },
        body: (async function* () {
          for (let i = 0; i < 10; i += 1) yield Buffer.alloc(1000, 2);
        })(),
      });
      expectError({ statusCode: streamed.status, body: streamed.body.toString() }, 413, 'payload_too_large');
      expect(streamed.headers['x-service-refund-id']).toBeTruthy();
      expect(await balanceOf(account.accountId)).toBe(1_000_000n);
    } finally {
      await small.close();
    }
  });

  it('refuses upstreams on private or loopback addresses unless ALLOW_PRIVATE_UPSTREAMS is on', async () => {
    const strict = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'false', REDIS_PREFIX: uniqueId('proxy') });
    try {
      const account = await funded();
      const byName = await registerApi({ baseUrl: upstream.url.replace('127.0.0.1', 'localhost'), price: '0.002' });
      const before = upstream.seen.length;
      for (const id of [apiId, byName]) {
        const res = await strict.inject({ method: 'GET', url: `/api/v1/proxy/${id}/x`, headers: { 'x-api-key': account.fullKey } });
        expectError(res, 403, 'private_upstream');
        // The answer does not name the host (an operator API's base URL is not published).
        expect(res.body).not.toMatch(/127\.0\.0\.1|localhost/);
      }
      expect(upstream.seen.length).toBe(before);
      expect(await balanceOf(account.accountId)).toBe(1_000_000n);
    } finally {
      await strict.close();
    }
  });
});

async function asResponse(pending: Promise<RawResponse>) {
  const res = await pending;
  return { statusCode: res.status, body: res.body.toString() };
}
