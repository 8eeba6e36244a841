import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '#contracts/key-format';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { describeAuthCases } from '../helpers/auth-cases.js';

interface KeyMeta {
  id: string;
  name: string;
  prefix: string;
  status: string;
  createdAt: string;
  lastUsedAt: string | null;
}

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => app.close());

const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, key: string, payload?: Record<string, unknown>) =>
  app.inject({ method, url, headers: bearer(key), ...(payload === undefined ? {} : { payload }) });
const createKey = async (owner: TestAccount, name = 'ci') =>
  expectOk<{ key: KeyMeta; fullKey: string }>(await call('POST', '/api/v1/keys', owner.fullKey, { name }), 201);
const whoami = (key: string) => app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(key) });

describe('POST /api/v1/keys and GET /api/v1/keys', () => {
  it('creates a key whose full value appears once and works at once; listings never show it', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const created = await createKey(owner, '  agent one  ');
    expect(created.fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expect(created.key).toEqual({
      id: expect.stringMatching(/^key_[0-9a-f]{16}$/),
      name: 'agent one',
      prefix: created.fullKey.slice(0, 19),
      status: 'enabled',
      createdAt: expect.any(String),
      lastUsedAt: null,
    });
    expectOk(await whoami(created.fullKey));

    const list = await call('GET', '/api/v1/keys', owner.fullKey);
    const body = expectOk<{ keys: KeyMeta[]; nextCursor: string | null }>(list);
    expect(body.keys.map((k) => k.id)).toEqual([created.key.id, owner.keyId]);
    expect(body.nextCursor).toBeNull();
    expect(list.body).not.toContain(created.fullKey);
    expect(list.body).not.toContain(owner.fullKey);
    for (const key of body.keys) expect(Object.keys(key).sort()).toEqual(['createdAt', 'id', 'lastUsedAt', 'name', 'prefix', 'status']);
  });

  it('records lastUsedAt off the request path, in a batch written at the latest when the instance stops', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { key, fullKey } = await createKey(owner);
    const other = await createTestApp();
    try {
      expectOk(await other.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(fullKey) }));
      const [row] = await app.deps.sql<{ last_used_at: Date | null }[]>`select last_used_at from api_keys where id = ${key.id}`;
      expect(row?.last_used_at).toBeNull();
    } finally {
      await other.close();
    }
    const list = expectOk<{ keys: KeyMeta[] }>(await call('GET', '/api/v1/keys', owner.fullKey));
    const used = list.keys.find((k) => k.id === key.id);
    expect(used?.lastUsedAt, JSON.stringify(used)).not.toBeNull();
    expect(Date.parse(used?.lastUsedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(used?.createdAt ?? ''));
  });

  it('pages with limit and cursor', async () => {
    const owner = await createTestAccount(app.deps.sql);
    for (const name of ['a', 'b', 'c']) await createKey(owner, name);
    const first = expectOk<{ keys: KeyMeta[]; nextCursor: string }>(await call('GET', '/api/v1/keys?limit=2', owner.fullKey));
    expect(first.keys.map((k) => k.name)).toEqual(['c', 'b']);
    const second = expectOk<{ keys: KeyMeta[]; nextCursor: string | null }>(
      await call('GET', `/api/v1/keys?limit=2&cursor=${first.nextCursor}`, owner.fullKey),
    );
    expect(second.keys.map((k) => k.name)).toEqual(['a', 'test key']);
    expect(second.nextCursor).toBeNull();
    expectError(await call('GET', '/api/v1/keys?limit=0', owner.fullKey), 400, 'validation_failed');
    expectError(await call('GET', '/api/v1/keys?limit=201', owner.fullKey), 400, 'validation_failed');
    expectError(await call('GET', `/api/v1/keys?cursor=${newId('key')}`, owner.fullKey), 400, 'validation_failed');
  });

  it('answers 400 for a missing, empty or overlong name and for unknown fields', async () => {
    const owner = await createTestAccount(app.deps.sql);
    expectError(await call('POST', '/api/v1/keys', owner.fullKey, {}), 400, 'validation_failed');
    expectError(await call('POST', '/api/v1/keys', owner.fullKey, { name: '   ' }), 400, 'validation_failed');
    expectError(await call('POST', '/api/v1/keys', owner.fullKey, { name: 'x'.repeat(101) }), 400, 'validation_failed');
    expectError(await call('POST', '/api/v1/keys', owner.fullKey, { name: 'ok', status: 'disabled' }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey) }), 400, 'body_missing');
  });
});

describe('the key state machine through PATCH and DELETE /api/v1/keys/{id}', () => {
  it('enabled -> disabled (403 for its requests) -> enabled (works again) -> renamed -> revoked (403, permanent)', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { key, fullKey } = await createKey(owner);
    const url = `/api/v1/keys/${key.id}`;

    const disabled = expectOk<{ key: KeyMeta }>(await call('PATCH', url, owner.fullKey, { status: 'disabled' }));
    expect(disabled.key).toMatchObject({ id: key.id, status: 'disabled', name: 'ci' });
    await expect.poll(async () => (await whoami(fullKey)).statusCode, { timeout: 1_000, interval: 20 }).toBe(403);
    expectError(await whoami(fullKey), 403, 'key_disabled');

    // Idempotent and rename while disabled.
    expectOk(await call('PATCH', url, owner.fullKey, { status: 'disabled' }));
    expect(expectOk<{ key: KeyMeta }>(await call('PATCH', url, owner.fullKey, { name: 'renamed while off' })).key).toMatchObject({
      name: 'renamed while off',
      status: 'disabled',
    });

    expect(expectOk<{ key: KeyMeta }>(await call('PATCH', url, owner.fullKey, { status: 'enabled' })).key.status).toBe('enabled');
    await expect.poll(async () => (await whoami(fullKey)).statusCode, { timeout: 1_000, interval: 20 }).toBe(200);

    expect(expectOk<{ key: KeyMeta }>(await call('PATCH', url, owner.fullKey, { name: 'both', status: 'disabled' })).key).toMatchObject({
      name: 'both',
      status: 'disabled',
    });

    const revoked = expectOk<{ key: KeyMeta }>(await call('DELETE', url, owner.fullKey));
    expect(revoked.key).toMatchObject({ id: key.id, status: 'revoked', name: 'both' });
    expectError(await whoami(fullKey), 403, 'key_revoked');

    // A revoked key cannot be changed in any way.
    expectError(await call('PATCH', url, owner.fullKey, { status: 'enabled' }), 409, 'conflict');
    expectError(await call('PATCH', url, owner.fullKey, { status: 'disabled' }), 409, 'conflict');
    expectError(await call('PATCH', url, owner.fullKey, { name: 'resurrect' }), 409, 'conflict');
    expectError(await call('DELETE', url, owner.fullKey), 409, 'conflict');
    expectError(await whoami(fullKey), 403, 'key_revoked');
    const [row] = await app.deps.sql<
      { status: string; revoked_at: Date | null; name: string }[]
    >`select status, revoked_at, name from api_keys where id = ${key.id}`;
    expect(row).toMatchObject({ status: 'revoked', name: 'both' });
    expect(row?.revoked_at).toBeInstanceOf(Date);
  });

  it('keeps a revocation permanent when an enable races it', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { key } = await createKey(owner);
    const url = `/api/v1/keys/${key.id}`;
    await call('PATCH', url, owner.fullKey, { status: 'disabled' });
    const [revoke, enable] = await Promise.all([call('DELETE', url, owner.fullKey), call('PATCH', url, owner.fullKey, { status: 'enabled' })]);
    expectOk(revoke);
    expect([200, 409], enable.body).toContain(enable.statusCode);
    const [row] = await app.deps.sql<{ status: string }[]>`select status from api_keys where id = ${key.id}`;
    expect(row?.status).toBe('revoked');
  });

  it('revokes an enabled key directly, and a key can revoke itself', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const { key, fullKey } = await createKey(owner);
    expect(expectOk<{ key: KeyMeta }>(await call('DELETE', `/api/v1/keys/${key.id}`, fullKey)).key.status).toBe('revoked');
    expectError(await whoami(fullKey), 403, 'key_revoked');
    expectOk(await whoami(owner.fullKey));
  });

  it('answers 400 for an empty patch, revoking through PATCH, bad status values and unknown fields', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const url = `/api/v1/keys/${owner.keyId}`;
    expectError(await call('PATCH', url, owner.fullKey, {}), 400, 'validation_failed');
    expectError(await call('PATCH', url, owner.fullKey, { status: 'revoked' }), 400, 'validation_failed');
    expectError(await call('PATCH', url, owner.fullKey, { status: 'ENABLED' }), 400, 'validation_failed');
    expectError(await call('PATCH', url, owner.fullKey, { name: '' }), 400, 'validation_failed');
    expectError(await call('PATCH', url, owner.fullKey, { prefix: 'service_sk_00000000' }), 400, 'validation_failed');
    expectOk(await whoami(owner.fullKey));
  });
});

describe('isolation between accounts', () => {
  it("answers 404 for another account's key id on PATCH and DELETE, and never changes or shows it", async () => {
    const alice = await createTestAccount(app.deps.sql);
    const mallory = await createTestAccount(app.deps.sql);
    const url = `/api/v1/keys/${alice.keyId}`;
    const patch = await call('PATCH', url, mallory.fullKey, { status: 'disabled', name: 'pwned' });
    expectError(patch, 404, 'not_found');
    expectError(await call('DELETE', url, mallory.fullKey), 404, 'not_found');
    expect(patch.body).not.toContain(alice.accountId);
    const list = expectOk<{ keys: KeyMeta[] }>(await call('GET', '/api/v1/keys', mallory.fullKey));
    expect(list.keys.map((k) => k.id)).toEqual([mallory.keyId]);
    expectError(await call('GET', `/api/v1/keys?cursor=${alice.keyId}`, mallory.fullKey), 400, 'validation_failed');
    const [row] = await app.deps.sql<{ status: string; name: string }[]>`select status, name from api_keys where id = ${alice.keyId}`;
    expect(row).toEqual({ status: 'enabled', name: 'test key' });
    expectOk(await whoami(alice.fullKey));
  });

  it('answers 404 for guessed, malformed and agent-key ids', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const agent = await createTestAccount(app.deps.sql, { keyKind: 'agent' });
    await app.deps.sql`update api_keys set account_id = ${owner.accountId} where id = ${agent.keyId}`;
    for (const id of [newId('key'), newId('key'), 'key_', '1', "key_' or 1=1 --", '%00', 'x'.repeat(100), agent.keyId]) {
      expectError(await call('PATCH', `/api/v1/keys/${encodeURIComponent(id)}`, owner.fullKey, { name: 'guess' }), 404, 'not_found');
      expectError(await call('DELETE', `/api/v1/keys/${encodeURIComponent(id)}`, owner.fullKey), 404, 'not_found');
    }
    expectError(await call('DELETE', `/api/v1/keys/${'x'.repeat(101)}`, owner.fullKey), 400, 'validation_failed');
  });
});

describeAuthCases({ app: () => app, method: 'GET', url: '/api/v1/keys', accountOnly: true });
describeAuthCases({ app: () => app, method: 'POST', url: '/api/v1/keys', payload: { name: 'x' }, accountOnly: true });
describeAuthCases({ app: () => app, method: 'PATCH', url: (caller) => `/api/v1/keys/${caller.keyId}`, payload: { name: 'x' }, accountOnly: true });
describeAuthCases({ app: () => app, method: 'DELETE', url: (caller) => `/api/v1/keys/${caller.keyId}`, accountOnly: true });
