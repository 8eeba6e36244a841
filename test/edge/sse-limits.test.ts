import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertStartedSession } from '#db/cookbook-sessions';
import { loadCookbooks } from '#db/cookbooks';
import { workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectError, type TestAccount } from '../helpers/app.js';
import { openSse } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

// Event streams are bounded per account: a capped number open at once (the next gets 429 with
// Retry-After), and each closes after a maximum lifetime (clients resume with Last-Event-ID).

describe('session event streams are bounded', () => {
  let app: FastifyInstance;
  let baseUrl: string;
  let account: TestAccount;
  let path: string;

  beforeAll(async () => {
    app = await createTestApp({
      REDIS_PREFIX: uniqueId('sselimit'),
      SSE_MAX_STREAMS_PER_ACCOUNT: '2',
      SSE_MAX_LIFETIME_SECONDS: '1',
      SSE_HEARTBEAT_MS: '200',
    });
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(app.deps.sql);
    // A session row of the account's (no workflow needed to follow its stream).
    const sessionId = uniqueId('ses_');
    await insertStartedSession(app.deps.sql, {
      sessionId,
      accountId: account.accountId,
      cookbookId: 'weather-alert-sms',
      workflowId: workflowIdFor(sessionId),
      totalSteps: 4,
      firstStepId: 'fetch-forecast',
      selectedApis: {},
      idempotencyKey: null,
      startedAt: new Date(),
    });
    path = `/api/v1/cookbooks/sessions/${sessionId}/events`;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('refuses a stream past the per-account cap with 429 and Retry-After, and frees the place when one closes', async () => {
    const first = await openSse(baseUrl, path, bearer(account.fullKey));
    const second = await openSse(baseUrl, path, bearer(account.fullKey));
    const refused = await app.inject({ method: 'GET', url: path, headers: bearer(account.fullKey) });
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers['retry-after']).toBe('5');
    first.close();
    await first.ended;
    // The server sees the client go: poll until the place is free.
    await expect
      .poll(
        async () => {
          const next = await openSse(baseUrl, path, bearer(account.fullKey));
          const status = next.response.statusCode;
          next.close();
          return status;
        },
        { timeout: 3_000, interval: 100 },
      )
      .toBe(200);
    second.close();
  });

  it('ends a stream after its maximum lifetime', async () => {
    const started = Date.now();
    const stream = await openSse(baseUrl, path, bearer(account.fullKey));
    await stream.ended;
    const lived = Date.now() - started;
    expect(lived).toBeGreaterThanOrEqual(900);
    expect(lived).toBeLessThan(5_000);
  });
});

describe('event streams across edge instances', () => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  const urls: Record<'a' | 'b', string> = { a: '', b: '' };
  let account: TestAccount;
  let path: string;
  const prefix = uniqueId('sseclu');

  beforeAll(async () => {
    const overrides = {
      REDIS_PREFIX: prefix,
      SSE_MAX_STREAMS_PER_ACCOUNT: '2',
      SSE_HEARTBEAT_MS: '200',
      SSE_STREAM_LEASE_SECONDS: '3',
      SSE_KEY_RECHECK_MS: '60000',
    };
    [a, b] = await Promise.all([createTestApp(overrides), createTestApp(overrides)]);
    for (const [name, app] of [
      ['a', a],
      ['b', b],
    ] as const) {
      await app.listen({ host: '127.0.0.1', port: 0 });
      urls[name] = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    }
    await loadCookbooks(a.deps.sql);
    account = await createTestAccount(a.deps.sql);
    const sessionId = uniqueId('ses_');
    await insertStartedSession(a.deps.sql, {
      sessionId,
      accountId: account.accountId,
      cookbookId: 'weather-alert-sms',
      workflowId: workflowIdFor(sessionId),
      totalSteps: 4,
      firstStepId: 'fetch-forecast',
      selectedApis: {},
      idempotencyKey: null,
      startedAt: new Date(),
    });
    path = `/api/v1/cookbooks/sessions/${sessionId}/events`;
  });
  afterAll(async () => Promise.all([a?.close(), b?.close()]));

  it('counts the per-account cap across every edge, and forgets the streams of an edge that died once their lease runs out', async () => {
    const onA = await openSse(urls.a, path, bearer(account.fullKey));
    const onB = await openSse(urls.b, path, bearer(account.fullKey));
    expect([onA.response.statusCode, onB.response.statusCode]).toEqual([200, 200]);
    // Each edge holds one stream; a third on either is over the account's cap of 2.
    expectError(await a.inject({ method: 'GET', url: path, headers: bearer(account.fullKey) }), 429, 'rate_limited');
    expectError(await b.inject({ method: 'GET', url: path, headers: bearer(account.fullKey) }), 429, 'rate_limited');
    onA.close();
    onB.close();
    await Promise.all([onA.ended, onB.ended]);

    // An edge that crashed never released its streams: they count until their lease (3 s here) runs out.
    const leases = `${prefix}:sse-streams:${account.accountId}`;
    await expect.poll(() => a.deps.redis.zcard(leases), { timeout: 3_000, interval: 50 }).toBe(0);
    const expiry = Date.now() + 1_500;
    await a.deps.redis.zadd(leases, expiry, 'crashed-edge-1', expiry, 'crashed-edge-2');
    expectError(await a.inject({ method: 'GET', url: path, headers: bearer(account.fullKey) }), 429, 'rate_limited');
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    const after = await openSse(urls.a, path, bearer(account.fullKey));
    expect(after.response.statusCode).toBe(200);
    after.close();
  });

  it('closes the streams a key opened, on every edge, when the key is revoked or disabled', async () => {
    const create = async (name: string) =>
      JSON.parse((await a.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(account.fullKey), payload: { name } })).body) as {
        key: { id: string };
        fullKey: string;
      };
    const doomed = await create('stream key');
    const onB = await openSse(urls.b, path, bearer(doomed.fullKey));
    expect(onB.response.statusCode).toBe(200);
    await onB.waitFor(0);
    const started = performance.now();
    expect((await a.inject({ method: 'DELETE', url: `/api/v1/keys/${doomed.key.id}`, headers: bearer(account.fullKey) })).statusCode).toBe(200);
    await onB.ended;
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(onB.events.at(-1)).toMatchObject({ event: 'stream.closed', data: { ok: false, code: 'key_revoked' } });
    // Reconnecting with it gets the key's answer.
    expectError(await b.inject({ method: 'GET', url: path, headers: bearer(doomed.fullKey) }), 403, 'key_revoked');

    const paused = await create('paused key');
    const onA = await openSse(urls.a, path, bearer(paused.fullKey));
    expect(
      (await b.inject({ method: 'PATCH', url: `/api/v1/keys/${paused.key.id}`, headers: bearer(account.fullKey), payload: { status: 'disabled' } }))
        .statusCode,
    ).toBe(200);
    await onA.ended;
    expect(onA.events.at(-1)).toMatchObject({ event: 'stream.closed' });
  });

  it('closes a stream whose key changed without an announcement, at the next re-check', async () => {
    const app = await createTestApp({ REDIS_PREFIX: uniqueId('sserecheck'), SSE_HEARTBEAT_MS: '200', SSE_KEY_RECHECK_MS: '300' });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const created = JSON.parse(
        (await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(account.fullKey), payload: { name: 'silent change' } })).body,
      ) as { key: { id: string }; fullKey: string };
      const stream = await openSse(url, path, bearer(created.fullKey));
      expect(stream.response.statusCode).toBe(200);
      // Changed in the database only: no edge hears of it, the re-check finds it.
      await app.deps.sql`update api_keys set status = 'revoked', revoked_at = now() where id = ${created.key.id}`;
      await stream.ended;
      expect(stream.events.at(-1)).toMatchObject({ event: 'stream.closed', data: { code: 'key_revoked' } });
    } finally {
      await app.close();
    }
  });
});
