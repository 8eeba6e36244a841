import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chargeRequest } from '#edge/http/charge';
import { publishKeyChange } from '#core/identity';
import { KEY_PREFIX } from '#contracts/key-format';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';

describe('key authentication on a route that requires it', () => {
  let app: FastifyInstance;
  let account: TestAccount;

  beforeAll(async () => {
    app = await createTestApp();
    app.get('/api/v1/__test/whoami', { config: { auth: 'key' } }, async (request) => ({ ok: true, accountId: request.auth?.accountId }));
    app.get('/api/v1/__test/account-only', { config: { auth: 'account' } }, async () => ({ ok: true }));
    app.get('/api/v1/__test/priced', { config: { auth: 'key' } }, async (request, reply) => {
      await chargeRequest(request, reply, { costMicros: 10_000n, item: 'test' });
      return { ok: true };
    });
    await app.ready();
    account = await createTestAccount(app.deps.sql);
  });
  afterAll(async () => app.close());

  const whoami = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/api/v1/__test/whoami', headers });

  it('accepts the key as a Bearer token and as X-API-Key', async () => {
    expect(expectOk(await whoami(bearer(account.fullKey))).accountId).toBe(account.accountId);
    expect(expectOk(await whoami({ 'x-api-key': account.fullKey })).accountId).toBe(account.accountId);
    expectOk(await whoami({ 'x-api-key': account.fullKey, authorization: `Bearer ${account.fullKey}` }));
  });

  it('answers 401 for a missing key, a wrong prefix, a malformed key and an unknown key', async () => {
    expectError(await whoami({}), 401, 'missing_credentials');
    expectError(await whoami(bearer('sk_live_' + 'a'.repeat(48))), 401, 'invalid_key');
    expectError(await whoami(bearer(account.fullKey.toUpperCase().replace('SERVICE_SK_', KEY_PREFIX))), 401, 'invalid_key');
    expectError(await whoami(bearer(account.fullKey.slice(0, -1))), 401, 'invalid_key');
    expectError(await whoami({ authorization: 'Basic abc' }), 401, 'invalid_key');
    // Same shape, broken checksum: rejected before any look-up.
    const flipped = account.fullKey.slice(0, -1) + (account.fullKey.endsWith('0') ? '1' : '0');
    expectError(await whoami(bearer(flipped)), 401, 'invalid_key');
  });

  it('answers 401 for a key one digit too long, a non-hex digit, inner whitespace and an empty header', async () => {
    const body = account.fullKey.slice(KEY_PREFIX.length);
    for (const bad of [
      `${account.fullKey}0`,
      `${KEY_PREFIX}${body.slice(0, 10)}g${body.slice(11)}`,
      `${KEY_PREFIX}${body.slice(0, 24)} ${body.slice(24)}`,
      `${KEY_PREFIX}${body.slice(0, 24)}\t${body.slice(24)}`,
      `${KEY_PREFIX}${body.slice(0, 47)}`,
      KEY_PREFIX,
    ]) {
      expectError(await whoami({ 'x-api-key': bad }), 401, 'invalid_key');
      expectError(await whoami({ authorization: `Bearer ${bad}` }), 401, 'invalid_key');
    }
    expectError(await whoami({ authorization: 'Bearer' }), 401, 'invalid_key');
    expectError(await whoami({ authorization: `Token ${account.fullKey}` }), 401, 'invalid_key');
  });

  it('tolerates whitespace around the key and any letter case of the Bearer scheme', async () => {
    expectOk(await whoami({ 'x-api-key': `  ${account.fullKey}  ` }));
    expectOk(await whoami({ authorization: `bearer   ${account.fullKey} ` }));
  });

  it('answers 401 when the two headers carry different keys', async () => {
    const other = await createTestAccount(app.deps.sql);
    expectError(await whoami({ authorization: `Bearer ${account.fullKey}`, 'x-api-key': other.fullKey }), 401, 'invalid_key');
  });

  it('answers 403 for a disabled or revoked key, promptly after the change is published', async () => {
    const victim = await createTestAccount(app.deps.sql);
    expectOk(await whoami(bearer(victim.fullKey)));
    await app.deps.sql`update api_keys set status = 'disabled' where id = ${victim.keyId}`;
    await publishKeyChange(app.deps.redis, app.deps.settings.REDIS_PREFIX, victim.keyId);
    await expect.poll(async () => (await whoami(bearer(victim.fullKey))).statusCode, { timeout: 1_000, interval: 20 }).toBe(403);
    expectError(await whoami(bearer(victim.fullKey)), 403, 'key_disabled');
    await app.deps.sql`update api_keys set status = 'revoked' where id = ${victim.keyId}`;
    await publishKeyChange(app.deps.redis, app.deps.settings.REDIS_PREFIX, victim.keyId);
    await expect.poll(async () => JSON.parse((await whoami(bearer(victim.fullKey))).body).code, { timeout: 1_000, interval: 20 }).toBe('key_revoked');
  });

  it('answers 402 with balance and cost for a valid key whose balance is below the price (auth table row 402)', async () => {
    const broke = await createTestAccount(app.deps.sql);
    const body = expectError(
      await app.inject({ method: 'GET', url: '/api/v1/__test/priced', headers: bearer(broke.fullKey) }),
      402,
      'insufficient_balance',
    );
    expect(body).toMatchObject({ balance: 0, cost: 0.01 });
    const funded = await createTestAccount(app.deps.sql, { balanceMicros: 10_000n });
    const res = await app.inject({ method: 'GET', url: '/api/v1/__test/priced', headers: bearer(funded.fullKey) });
    expectOk(res);
    expect(res.headers['x-service-balance']).toBe('0');
  });

  it('refuses agent keys on account-only routes with 403', async () => {
    const agent = await createTestAccount(app.deps.sql, { keyKind: 'agent' });
    expectOk(await whoami(bearer(agent.fullKey)));
    expectError(await app.inject({ method: 'GET', url: '/api/v1/__test/account-only', headers: bearer(agent.fullKey) }), 403, 'agent_key_forbidden');
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/__test/account-only', headers: bearer(account.fullKey) }));
  });
});
