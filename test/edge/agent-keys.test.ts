import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '#contracts/key-format';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { describeAuthCases } from '../helpers/auth-cases.js';

interface AgentKey {
  id: string;
  name: string;
  prefix: string;
  status: string;
  spendLimit: number | null;
  spent: number;
  allowedApis: string[] | null;
  expiresAt: string | null;
}

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => app.close());

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string, payload?: Record<string, unknown>) =>
  app.inject({ method, url, headers: bearer(key), ...(payload === undefined ? {} : { payload }) });
const create = (owner: TestAccount, payload: Record<string, unknown>) => call('POST', '/api/v1/agent-keys', owner.fullKey, payload);
const whoami = (key: string) => app.inject({ method: 'GET', url: '/api/auth/session', headers: bearer(key) });

describe('/api/v1/agent-keys', () => {
  it('creates an agent key with limits, stores them, shows the full key once, and lists it without it', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const body = expectOk<{ agentKey: AgentKey; fullKey: string }>(
      await create(owner, { name: 'crawler', spendLimit: '2.50', allowedApis: ['openweathermap.org', 'github.com', 'github.com'], expiresAt }),
      201,
    );
    expect(body.fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expect(body.agentKey).toMatchObject({
      id: expect.stringMatching(/^agk_[0-9a-f]{16}$/),
      name: 'crawler',
      prefix: body.fullKey.slice(0, 19),
      status: 'enabled',
      spendLimit: 2.5,
      spent: 0,
      allowedApis: ['openweathermap.org', 'github.com'],
      expiresAt,
    });
    const [row] = await app.deps.sql<{ kind: string; spend_limit_micros: bigint; allowed_apis: string[] }[]>`
      select kind, spend_limit_micros, allowed_apis from api_keys where id = ${body.agentKey.id}`;
    expect(row).toEqual({ kind: 'agent', spend_limit_micros: 2_500_000n, allowed_apis: ['openweathermap.org', 'github.com'] });

    // The agent key authenticates (as an agent key) ...
    expect(expectOk<{ via: string }>(await whoami(body.fullKey)).via).toBe('key');

    const minimal = expectOk<{ agentKey: AgentKey }>(await create(owner, { name: 'plain', spendLimit: 5 }), 201);
    expect(minimal.agentKey).toMatchObject({ spendLimit: 5, allowedApis: null, expiresAt: null });

    const list = await call('GET', '/api/v1/agent-keys', owner.fullKey);
    const listed = expectOk<{ agentKeys: AgentKey[]; nextCursor: null }>(list);
    expect(listed.agentKeys.map((k) => k.id)).toEqual([minimal.agentKey.id, body.agentKey.id]);
    expect(list.body).not.toContain(body.fullKey);
    // ... and agent keys are not API keys: /keys does not list them.
    const keys = expectOk<{ keys: Array<{ id: string }> }>(await call('GET', '/api/v1/keys', owner.fullKey));
    expect(keys.keys.map((k) => k.id)).toEqual([owner.keyId]);
  });

  it('deletes an agent key: 403 for its requests at once, gone from the list, 404 on a second delete', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { agentKey, fullKey } = expectOk<{ agentKey: AgentKey; fullKey: string }>(await create(owner, { name: 'temp' }), 201);
    expectOk(await whoami(fullKey));
    const deleted = expectOk<{ agentKey: AgentKey }>(await call('DELETE', `/api/v1/agent-keys/${agentKey.id}`, owner.fullKey));
    expect(deleted.agentKey).toMatchObject({ id: agentKey.id, status: 'revoked' });
    expectError(await whoami(fullKey), 403, 'key_revoked');
    expect(expectOk<{ agentKeys: AgentKey[] }>(await call('GET', '/api/v1/agent-keys', owner.fullKey)).agentKeys).toEqual([]);
    expectError(await call('DELETE', `/api/v1/agent-keys/${agentKey.id}`, owner.fullKey), 404, 'not_found');
  });

  it('refuses an expired agent key with 403', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { agentKey, fullKey } = expectOk<{ agentKey: AgentKey; fullKey: string }>(
      await create(owner, { name: 'short-lived', expiresAt: new Date(Date.now() + 60_000).toISOString() }),
      201,
    );
    await app.deps.sql`update api_keys set expires_at = now() - interval '1 second' where id = ${agentKey.id}`;
    app.keyVerifier.evict(agentKey.id);
    expectError(await whoami(fullKey), 403, 'key_expired');
  });

  it('answers 400 for bad bodies', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const past = new Date(Date.now() - 1000).toISOString();
    for (const [payload, field] of [
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: 'x', spendLimit: -1 }, 'spendLimit'],
      [{ name: 'x', spendLimit: '1.0000001' }, 'spendLimit'],
      [{ name: 'x', spendLimit: 'ten' }, 'spendLimit'],
      [{ name: 'x', spendLimit: true }, 'spendLimit'],
      [{ name: 'x', allowedApis: 'github.com' }, 'allowedApis'],
      [{ name: 'x', allowedApis: ['Not An Id'] }, 'allowedApis'],
      [{ name: 'x', expiresAt: past }, 'expiresAt'],
      [{ name: 'x', expiresAt: 'tomorrow' }, 'expiresAt'],
      [{ name: 'x', kind: 'api' }, 'kind'],
    ] as const) {
      const body = expectError(await create(owner, payload), 400, 'validation_failed');
      expect(body.error, JSON.stringify(payload)).toContain(field);
    }
    expect(expectOk<{ agentKeys: AgentKey[] }>(await call('GET', '/api/v1/agent-keys', owner.fullKey)).agentKeys).toEqual([]);
  });

  it("answers 404 for another account's agent key, an API key id and guessed ids", async () => {
    const alice = await createTestAccount(app.deps.sql);
    const mallory = await createTestAccount(app.deps.sql);
    const { agentKey, fullKey } = expectOk<{ agentKey: AgentKey; fullKey: string }>(await create(alice, { name: 'alice agent' }), 201);
    expectError(await call('DELETE', `/api/v1/agent-keys/${agentKey.id}`, mallory.fullKey), 404, 'not_found');
    expectError(await call('DELETE', `/api/v1/agent-keys/${mallory.keyId}`, mallory.fullKey), 404, 'not_found');
    expectError(await call('DELETE', `/api/v1/agent-keys/${newId('agk')}`, mallory.fullKey), 404, 'not_found');
    expect(expectOk<{ agentKeys: AgentKey[] }>(await call('GET', '/api/v1/agent-keys', mallory.fullKey)).agentKeys).toEqual([]);
    expectOk(await whoami(fullKey));
  });

  it('an agent key cannot create agent keys or API keys', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { fullKey } = expectOk<{ fullKey: string }>(await create(owner, { name: 'agent' }), 201);
    expectError(await call('POST', '/api/v1/agent-keys', fullKey, { name: 'child' }), 403, 'agent_key_forbidden');
    expectError(await call('POST', '/api/v1/keys', fullKey, { name: 'escalate' }), 403, 'agent_key_forbidden');
  });
});

describeAuthCases({ app: () => app, method: 'GET', url: '/api/v1/agent-keys', accountOnly: true });
describeAuthCases({ app: () => app, method: 'POST', url: '/api/v1/agent-keys', payload: { name: 'x' }, accountOnly: true });
describeAuthCases({ app: () => app, method: 'DELETE', url: `/api/v1/agent-keys/${newId('agk')}`, accountOnly: true });
