import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { generateKey } from '#contracts/key-format';
import { clientAddress } from '#edge/plugins/rate-limit';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { loginUser, registerUser, TEST_PASSWORD } from '../helpers/session.js';
import { registerApi, startUpstream } from '../helpers/upstream.js';

const apps: FastifyInstance[] = [];
/** An app with its own Redis prefix (so counters start at zero) and the given low limits. */
async function limitedApp(overrides: Record<string, string>, prefix = uniqueId('rl')): Promise<FastifyInstance> {
  const app = await createTestApp({ REDIS_PREFIX: prefix, ...overrides });
  apps.push(app);
  return app;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

function expectLimitHeaders(res: LightMyRequestResponse, limit: number, remaining: number) {
  const context = `response was ${res.statusCode}: ${JSON.stringify(res.headers)} ${res.body}`;
  expect(res.headers['x-ratelimit-limit'], context).toBe(String(limit));
  expect(res.headers['x-ratelimit-remaining'], context).toBe(String(remaining));
}

function expectLimited(res: LightMyRequestResponse, limit: number, windowSeconds: number) {
  const body = expectError(res, 429, 'rate_limited');
  expectLimitHeaders(res, limit, 0);
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter, JSON.stringify(res.headers)).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
  expect(body.hint).toMatch(/Retry-After/);
}

describe('rate limits', () => {
  it('limits public routes per client address, with the headers on every response and 429 past the limit', async () => {
    const app = await limitedApp({ RATE_LIMIT_PUBLIC_MAX: '3', RATE_LIMIT_PUBLIC_WINDOW_SECONDS: '60' });
    const get = (remoteAddress = '203.0.113.7') => app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress });
    for (const remaining of [2, 1, 0]) {
      const res = await get();
      expect(res.statusCode, res.body.slice(0, 200)).toBe(200);
      expectLimitHeaders(res, 3, remaining);
    }
    expectLimited(await get(), 3, 60);
    // Another address has its own budget; health probes are never limited.
    expectLimitHeaders(await get('198.51.100.1'), 3, 2);
    const health = await app.inject({ method: 'GET', url: '/api/v1/health', remoteAddress: '203.0.113.7' });
    expect(health.headers['x-ratelimit-limit']).toBeUndefined();
    expect(health.statusCode).not.toBe(429);
  });

  it('limits authenticated routes per key, and the dashboard cookie per account', async () => {
    const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '2', RATE_LIMIT_PUBLIC_MAX: '1000' });
    const owner = await createTestAccount(app.deps.sql);
    const second = expectOk<{ fullKey: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name: 'b' } }),
      201,
    );
    const list = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/api/v1/keys', headers });
    expectLimitHeaders(expectStatus(await list(bearer(owner.fullKey)), 200), 2, 0);
    expectLimited(await list(bearer(owner.fullKey)), 2, 60);
    // The same account's other key has its own budget.
    expectLimitHeaders(expectStatus(await list(bearer(second.fullKey)), 200), 2, 1);

    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    expectLimitHeaders(expectStatus(await list({ cookie: browser.cookie }), 200), 2, 1);
    expectLimitHeaders(expectStatus(await list({ cookie: browser.cookie }), 200), 2, 0);
    expectLimited(await list({ cookie: browser.cookie }), 2, 60);
  });

  it('limits the account as a whole too: minting keys does not multiply the limit', async () => {
    const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '3', RATE_LIMIT_ACCOUNT_MAX: '4', RATE_LIMIT_PUBLIC_MAX: '1000' });
    const owner = await createTestAccount(app.deps.sql);
    const keys = [owner.fullKey];
    for (const name of ['b', 'c']) {
      keys.push(
        expectOk<{ fullKey: string }>(
          await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name } }),
          201,
        ).fullKey,
      );
    }
    // Two key creations above spent two of the account's four calls.
    const list = (key: string) => app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(key) });
    expectLimitHeaders(expectStatus(await list(keys[1]!), 200), 3, 2);
    expectStatus(await list(keys[2]!), 200);
    // Each of the fresh keys has budget left of its own, but the account has none.
    expectLimited(await list(keys[2]!), 4, 60);
    expectLimited(await list(keys[1]!), 4, 60);
  });

  it('caps the live keys and agent keys an account may hold (409 naming the cap), counting revoked ones out', async () => {
    const app = await limitedApp({ MAX_KEYS_PER_ACCOUNT: '2' });
    const owner = await createTestAccount(app.deps.sql);
    const create = (path: string, name: string) =>
      app.inject({ method: 'POST', url: `/api/v1/${path}`, headers: bearer(owner.fullKey), payload: { name } });
    const second = expectOk<{ key: { id: string } }>(await create('keys', 'second'), 201);
    const refused = expectError(await create('keys', 'third'), 409, 'conflict');
    expect(refused.error).toContain('2 live API keys');
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/keys/${second.key.id}`, headers: bearer(owner.fullKey) }));
    expectOk(await create('keys', 'third'), 201);
    expectOk(await create('agent-keys', 'a1'), 201);
    expectOk(await create('agent-keys', 'a2'), 201);
    expectError(await create('agent-keys', 'a3'), 409, 'conflict');
  });

  it('is stricter on registration and login, per client address, whatever the body', async () => {
    const app = await limitedApp({ RATE_LIMIT_REGISTER_MAX: '2', RATE_LIMIT_LOGIN_MAX: '2', RATE_LIMIT_LOGIN_WINDOW_SECONDS: '300' });
    const register = (email: string) =>
      app.inject({ method: 'POST', url: '/api/v1/register', payload: { email, password: TEST_PASSWORD }, remoteAddress: '192.0.2.10' });
    const first = await register(`${uniqueId('rl')}@example.test`);
    expect(first.statusCode, first.body).toBe(201);
    expectLimitHeaders(first, 2, 1);
    expectError(await register('not-an-email'), 400, 'validation_failed');
    expectLimited(await register(`${uniqueId('rl')}@example.test`), 2, 3600);

    const user = { email: JSON.parse(first.body).account.email as string, password: TEST_PASSWORD };
    const login = (password: string) =>
      app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email, password }, remoteAddress: '192.0.2.10' });
    expectError(await login('wrong password guess'), 401, 'invalid_credentials');
    expectLimitHeaders(await login('another wrong guess'), 2, 0);
    // Past the limit even the right password waits: guessing is throttled per address.
    expectLimited(await login(user.password), 2, 300);
  });

  it('counts every one of many simultaneous hits exactly (they share one Redis call)', async () => {
    const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '20', RATE_LIMIT_PUBLIC_MAX: '1000' });
    const owner = await createTestAccount(app.deps.sql);
    const responses = await Promise.all(
      Array.from({ length: 30 }, () => app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(owner.fullKey) })),
    );
    const passed = responses.filter((r) => r.statusCode === 200);
    expect(passed).toHaveLength(20);
    expect(responses.filter((r) => r.statusCode === 429)).toHaveLength(10);
    // Each admitted hit saw its own count: the remaining budgets are 19 down to 0, once each.
    expect(passed.map((r) => Number(r.headers['x-ratelimit-remaining'])).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    // Each call counts against its key and its account: two hits, in the same script calls.
    expect(app.rateLimiter.stats.hits).toBe(60);
    expect(app.rateLimiter.stats.calls).toBeLessThan(30);
  });

  it('counts in Redis, shared by every edge instance', async () => {
    const prefix = uniqueId('rl');
    const overrides = { RATE_LIMIT_PUBLIC_MAX: '3' };
    const a = await limitedApp(overrides, prefix);
    const b = await limitedApp(overrides, prefix);
    const get = (app: FastifyInstance) => app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress: '203.0.113.99' });
    expectLimitHeaders(await get(a), 3, 2);
    expectLimitHeaders(await get(b), 3, 1);
    expectLimitHeaders(await get(a), 3, 0);
    expectLimited(await get(b), 3, 60);
    const keys = await a.deps.redis.keys(`${prefix}:ratelimit:*`);
    expect(keys).toEqual([`${prefix}:ratelimit:public:ip:203.0.113.99`]);
  });

  it('opens a new window when the old one ends', async () => {
    const app = await limitedApp({ RATE_LIMIT_PUBLIC_MAX: '1', RATE_LIMIT_PUBLIC_WINDOW_SECONDS: '1' });
    const get = () => app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress: '203.0.113.5' });
    // The first request builds the OpenAPI document, which took 1.4 s on a loaded host: longer than the
    // window, so it is made from another address first.
    expect((await app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress: '203.0.113.6' })).statusCode).toBe(200);
    // An admitted hit, then a refused one in the same window. A stall between the two may still let the
    // window end between them (both admitted): the pair is tried again, for up to 10 s.
    let refused: LightMyRequestResponse | undefined;
    const seen: string[] = [];
    const hit = async () => {
      const started = performance.now();
      const res = await get();
      seen.push(`${res.statusCode} in ${Math.round(performance.now() - started)} ms`);
      return res;
    };
    const until = Date.now() + 10_000;
    while (!refused && Date.now() < until) {
      if ((await hit()).statusCode !== 200) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      const next = await hit();
      if (next.statusCode !== 200) refused = next;
    }
    expect(refused, `no two hits fell within one 1 s window: ${seen.join(', ')}`).toBeDefined();
    expectLimited(refused!, 1, 1);
    await expect.poll(async () => (await get()).statusCode, { timeout: 3_000, interval: 100 }).toBe(200);
  });

  it('lets requests through when Redis is unreachable (fail open), but refuses sign-in and sign-up (fail closed, 503)', async () => {
    const app = await limitedApp({ REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_PUBLIC_MAX: '1' });
    for (let i = 0; i < 2; i++) {
      const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      expect(res.statusCode, res.body.slice(0, 200)).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
    const credentials = { email: `${randomUUID()}@example.test`, password: 'correct horse battery staple' };
    for (const url of ['/api/v1/register', '/api/auth/login']) {
      const res = await app.inject({ method: 'POST', url, payload: credentials });
      expectError(res, 503, 'service_unavailable');
      expect(res.headers['retry-after'], url).toBe('30');
    }
  });
});

function expectStatus(res: LightMyRequestResponse, status: number): LightMyRequestResponse {
  expect(res.statusCode, `response was ${res.statusCode}: ${res.body}`).toBe(status);
  return res;
}

describe('rate limits on refused credentials, and no lock-out on login', () => {
  it('counts refused credentials against the address, with the headers on the 401', async () => {
    const app = await limitedApp({ RATE_LIMIT_PUBLIC_MAX: '2' });
    const guess = () =>
      app.inject({ method: 'GET', url: '/api/v1/keys', headers: { 'x-api-key': generateKey().fullKey }, remoteAddress: '203.0.113.66' });
    const first = await guess();
    expectError(first, 401, 'invalid_key');
    expectLimitHeaders(first, 2, 1);
    expectError(await guess(), 401, 'invalid_key');
    expectLimited(await guess(), 2, 60);
    expectError(
      await app.inject({ method: 'GET', url: '/api/v1/keys', headers: { cookie: 'session=forged' }, remoteAddress: '203.0.113.66' }),
      429,
      'rate_limited',
    );
    // A valid key from the same address still works: it has its own budget.
    const owner = await createTestAccount(app.deps.sql);
    expectStatus(await app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(owner.fullKey), remoteAddress: '203.0.113.66' }), 200);
  });

  it('never locks an account: failures from other addresses leave the right password working (see login-throttle.test.ts)', async () => {
    const app = await limitedApp({ RATE_LIMIT_LOGIN_MAX: '2' });
    const user = await registerUser(app);
    const login = (remoteAddress: string, password: string) =>
      app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email.toUpperCase(), password }, remoteAddress });
    expectError(await login('198.51.100.1', 'wrong guess number 1'), 401, 'invalid_credentials');
    expectError(await login('198.51.100.2', 'wrong guess number 2'), 401, 'invalid_credentials');
    expectStatus(await login('198.51.100.3', user.password), 200);
    // Another account from those addresses is not affected.
    const other = await registerUser(app);
    expectStatus(
      await app.inject({
        method: 'POST',
        url: '/api/auth/login',
        payload: { email: other.email, password: other.password },
        remoteAddress: '198.51.100.4',
      }),
      200,
    );
  });
});

describe('client addresses', () => {
  it('counts IPv4 as is and IPv6 by its /64', () => {
    expect(clientAddress('203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddress('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddress('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientAddress('2001:0db8:0000:0000:ffff:1:2:3')).toBe('2001:db8:0:0::/64');
    expect(clientAddress('2001:db8:0:1::1')).toBe('2001:db8:0:1::/64');
    expect(clientAddress('::1')).toBe('0:0:0:0::/64');
    expect(clientAddress('fe80::')).toBe('fe80:0:0:0::/64');
  });

  it('shares one budget across a /64', async () => {
    const app = await limitedApp({ RATE_LIMIT_PUBLIC_MAX: '2' });
    const get = (remoteAddress: string) => app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress });
    expectLimitHeaders(await get('2001:db8:aa::1'), 2, 1);
    expectLimitHeaders(await get('2001:db8:aa::ffff'), 2, 0);
    expectLimited(await get('2001:db8:aa:0:1:2:3:4'), 2, 60);
    expectLimitHeaders(await get('2001:db8:ab::1'), 2, 1);
  });
});

describe('MCP batches (finding 6: every message counts)', () => {
  const batchOf = (messages: { method: string; params?: object }[]) => messages.map((m, i) => ({ jsonrpc: '2.0', id: i + 1, params: {}, ...m }));
  const postBatch = (app: FastifyInstance, key: string, body: unknown) =>
    app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        ...bearer(key),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
      },
      payload: JSON.stringify(body),
    });

  it('counts each message of a batch, and refuses a batch past the budget whole, before any message runs', async () => {
    const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '10', RATE_LIMIT_ACCOUNT_MAX: '1000' });
    const owner = await createTestAccount(app.deps.sql);
    const newKey = async () =>
      expectOk<{ fullKey: string }>(
        await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name: uniqueId('k') } }),
        201,
      ).fullKey;

    // 11 listings with a budget of 10: one 429 with Retry-After, no answers.
    const flood = await postBatch(app, await newKey(), batchOf(Array.from({ length: 11 }, () => ({ method: 'tools/list' }))));
    expectLimited(flood, 10, 60);
    expect(flood.body).not.toContain('"tools"');

    // 4 listings cost 4; then a batch of 7 exceeds the 6 left and is refused whole.
    const key = await newKey();
    const four = expectStatus(await postBatch(app, key, batchOf(Array.from({ length: 4 }, () => ({ method: 'tools/list' })))), 200);
    expectLimitHeaders(four, 10, 6);
    expect(four.body.match(/"tools"/g)?.length, four.body).toBe(4);
    const seven = await postBatch(app, key, batchOf(Array.from({ length: 7 }, () => ({ method: 'tools/list' }))));
    expectLimited(seven, 10, 60);
  });

  it('counts the tool calls of a batch with the batch, once: the calls they make are not counted again', async () => {
    const upstream = await startUpstream();
    try {
      const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '10', RATE_LIMIT_ACCOUNT_MAX: '1000', ALLOW_PRIVATE_UPSTREAMS: 'true' });
      const owner = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
      const apiId = await registerApi({ baseUrl: upstream.url, price: '0.001' });
      const batch = batchOf([
        { method: 'tools/call', params: { name: 'get_balance', arguments: {} } },
        { method: 'tools/call', params: { name: 'call_api', arguments: { apiId, path: '/hello' } } },
        { method: 'tools/list' },
        { method: 'tools/list' },
      ]);
      const answered = expectStatus(await postBatch(app, owner.fullKey, batch), 200);
      expect(answered.body, answered.body).toContain('balance');
      expect(upstream.seen.map((r) => r.url)).toEqual(['/hello']);
      // 4 messages, 4 tokens: the next call sees 5 left (not 3, as counting the calls the tools made again would leave,
      // nor 6, as counting the batch once and each tool's call would).
      expectLimitHeaders(expectStatus(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(owner.fullKey) }), 200), 10, 5);
    } finally {
      await upstream.close();
    }
  });

  it('refuses a batch of tool calls past what is left before any runs', async () => {
    const app = await limitedApp({ RATE_LIMIT_KEY_MAX: '10', RATE_LIMIT_ACCOUNT_MAX: '1000' });
    const owner = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    for (const remaining of [9, 8, 7, 6]) {
      expectLimitHeaders(
        expectStatus(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(owner.fullKey) }), 200),
        10,
        remaining,
      );
    }
    // A batch of tool calls past what is left is refused before any runs (nothing is called, nothing charged).
    const tooMany = await postBatch(
      app,
      owner.fullKey,
      batchOf(Array.from({ length: 7 }, () => ({ method: 'tools/call', params: { name: 'get_balance', arguments: {} } }))),
    );
    expectLimited(tooMany, 10, 60);
  });
});
