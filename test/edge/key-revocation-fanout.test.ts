import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyChangesChannel } from '#core/identity';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

describe('a key change reaches a second edge instance within one second', () => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  beforeAll(async () => {
    // Long cache TTL: only the Redis announcement can make instance B forget the key in time. A
    // prefix of their own lets the test see when both instances listen on the change channel.
    const overrides = { KEY_CACHE_TTL_MS: '600000', REDIS_PREFIX: uniqueId('fanout') };
    [a, b] = await Promise.all([createTestApp(overrides), createTestApp(overrides)]);
    const channel = keyChangesChannel(overrides.REDIS_PREFIX);
    const deadline = Date.now() + 5_000;
    while (((await a.deps.redis.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1] < 2) {
      if (Date.now() > deadline) throw new Error(`both instances did not subscribe to ${channel} within 5 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
  afterAll(async () => Promise.all([a.close(), b.close()]));

  const whoami = (app: FastifyInstance, key: string) => app.inject({ method: 'GET', url: '/api/auth/session', headers: bearer(key) });

  async function warmBoth(key: string) {
    expectOk(await whoami(a, key));
    expectOk(await whoami(b, key));
  }

  /** Polls B until it refuses the key; returns how long that took. */
  async function msUntilRefusedOnB(key: string, code: string): Promise<number> {
    const started = performance.now();
    await expect.poll(async () => JSON.parse((await whoami(b, key)).body).code, { timeout: 1_000, interval: 10 }).toBe(code);
    return performance.now() - started;
  }

  it('revoking through instance A makes instance B answer 403 in under a second', async () => {
    const owner = await createTestAccount(a.deps.sql);
    const { key, fullKey } = expectOk<{ key: { id: string }; fullKey: string }>(
      await a.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name: 'fan-out' } }),
      201,
    );
    await warmBoth(fullKey);
    // Prove B really caches: a change in the database alone, unannounced, does not reach it.
    await b.deps.sql`update api_keys set status = 'disabled' where id = ${key.id}`;
    expectOk(await whoami(b, fullKey));
    await b.deps.sql`update api_keys set status = 'enabled' where id = ${key.id}`;

    const started = performance.now();
    expectOk(await a.inject({ method: 'DELETE', url: `/api/v1/keys/${key.id}`, headers: bearer(owner.fullKey) }));
    expectError(await whoami(a, fullKey), 403, 'key_revoked');
    await msUntilRefusedOnB(fullKey, 'key_revoked');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('disabling through instance A reaches instance B too, and enabling brings it back', async () => {
    const owner = await createTestAccount(a.deps.sql);
    const { key, fullKey } = expectOk<{ key: { id: string }; fullKey: string }>(
      await a.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name: 'toggle' } }),
      201,
    );
    await warmBoth(fullKey);
    expectOk(await a.inject({ method: 'PATCH', url: `/api/v1/keys/${key.id}`, headers: bearer(owner.fullKey), payload: { status: 'disabled' } }));
    expect(await msUntilRefusedOnB(fullKey, 'key_disabled')).toBeLessThan(1_000);
    expectOk(await a.inject({ method: 'PATCH', url: `/api/v1/keys/${key.id}`, headers: bearer(owner.fullKey), payload: { status: 'enabled' } }));
    await expect.poll(async () => (await whoami(b, fullKey)).statusCode, { timeout: 1_000, interval: 10 }).toBe(200);
  });

  it('deleting an agent key through instance A reaches instance B', async () => {
    const owner = await createTestAccount(a.deps.sql);
    const { agentKey, fullKey } = expectOk<{ agentKey: { id: string }; fullKey: string }>(
      await a.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: bearer(owner.fullKey), payload: { name: 'fan-out agent' } }),
      201,
    );
    await warmBoth(fullKey);
    expectOk(await a.inject({ method: 'DELETE', url: `/api/v1/agent-keys/${agentKey.id}`, headers: bearer(owner.fullKey) }));
    expect(await msUntilRefusedOnB(fullKey, 'key_revoked')).toBeLessThan(1_000);
  });
});
