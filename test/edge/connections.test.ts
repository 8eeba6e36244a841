import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSecret, connectionContext, sealSecret } from '#core/platform';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

describe('connections (bring your own key)', () => {
  let app: FastifyInstance;
  let upstream: TestUpstream;
  let edge: string;
  let apiId: string;
  const BYO = 'byo-secret-key-abcdef-9876';
  const prefix = uniqueId('conn');

  beforeAll(async () => {
    upstream = await startUpstream();
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    apiId = await registerApi({
      baseUrl: upstream.url,
      price: '0.01',
      byokPrice: '0.001',
      auth: 'header:X-Upstream-Key',
      platformKey: 'platform-key-000000',
    });
  });
  afterAll(async () => {
    await app.close();
    await upstream.close();
  });

  const connect = (key: string, id: string, body: unknown) =>
    app.inject({ method: 'POST', url: `/api/v1/connect/${id}`, headers: bearer(key), payload: body as object });

  it('stores the key encrypted, lists only a hint, and the proxy uses it at the BYOK price', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const before = upstream.seen.length;
    const platformCall = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/x`, headers: { 'x-api-key': account.fullKey } });
    expect(platformCall.headers['x-service-cost']).toBe('0.01');
    expect(upstream.seen[before]!.headers['x-upstream-key']).toBe('platform-key-000000');

    const created = expectOk<{ connection: { apiId: string; keyHint: string; createdAt: string } }>(
      await connect(account.fullKey, apiId, { apiKey: BYO }),
      201,
    );
    expect(created.connection).toMatchObject({ apiId, keyHint: '…9876' });
    expect(JSON.stringify(created)).not.toContain(BYO);

    const [row] = await app.deps.sql<
      { key_encrypted: Buffer }[]
    >`select key_encrypted from connections where account_id = ${account.accountId} and api_id = ${apiId}`;
    expect(row!.key_encrypted.includes(Buffer.from(BYO))).toBe(false);
    expect(openSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, row!.key_encrypted, connectionContext(account.accountId, apiId))).toBe(BYO);
    // Bound to its row: the same blob does not open as another account's connection.
    expect(() => openSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, row!.key_encrypted, connectionContext(account.accountId, 'other'))).toThrow();

    const list = expectOk<{ connections: Array<{ apiId: string; keyHint: string }> }>(
      await app.inject({ method: 'GET', url: '/api/v1/me/apis', headers: bearer(account.fullKey) }),
    );
    expect(list.connections).toEqual([expect.objectContaining({ apiId, keyHint: '…9876' })]);
    expect(JSON.stringify(list)).not.toContain(BYO);

    const byok = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/x`, headers: { 'x-api-key': account.fullKey } });
    expect(byok.status).toBe(200);
    expect(byok.headers['x-service-cost']).toBe('0.001');
    expect(upstream.seen.at(-1)!.headers['x-upstream-key']).toBe(BYO);

    // Replacing keeps one connection; disconnecting falls back to the platform key.
    expectOk(await connect(account.fullKey, apiId, { apiKey: 'second-key-zzzz-1111' }), 201);
    const removed = expectOk<{ connection: { keyHint: string } }>(
      await app.inject({ method: 'DELETE', url: `/api/v1/connect/${apiId}`, headers: bearer(account.fullKey) }),
    );
    expect(removed.connection.keyHint).toBe('…1111');
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/connect/${apiId}`, headers: bearer(account.fullKey) }), 404, 'not_found');
    expect(
      expectOk<{ connections: unknown[] }>(await app.inject({ method: 'GET', url: '/api/v1/me/apis', headers: bearer(account.fullKey) })).connections,
    ).toEqual([]);
    await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/x`, headers: { 'x-api-key': account.fullKey } });
    expect(upstream.seen.at(-1)!.headers['x-upstream-key']).toBe('platform-key-000000');
  });

  it('keeps connections per account', async () => {
    const a = await createTestAccount(app.deps.sql);
    const b = await createTestAccount(app.deps.sql);
    expectOk(await connect(a.fullKey, apiId, { apiKey: 'a-key-123456789' }), 201);
    expect(
      expectOk<{ connections: unknown[] }>(await app.inject({ method: 'GET', url: '/api/v1/me/apis', headers: bearer(b.fullKey) })).connections,
    ).toEqual([]);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/connect/${apiId}`, headers: bearer(b.fullKey) }), 404);
  });

  it("remembers a caller's connection in each edge without a query per call, and every edge forgets it within a second when it changes", async () => {
    const other = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix });
    try {
      await other.listen({ host: '127.0.0.1', port: 0 });
      const otherEdge = `http://127.0.0.1:${(other.server.address() as AddressInfo).port}`;
      await until('both edges hear connection changes', () => app.connectionCache.live && other.connectionCache.live);
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 10_000_000n });
      const keySentBy = async (url: string) => {
        const answer = await rawRequest(url, { method: 'GET', path: `/api/v1/proxy/${apiId}/x`, headers: { 'x-api-key': account.fullKey } });
        expect(answer.status).toBe(200);
        return upstream.seen.at(-1)!.headers['x-upstream-key'];
      };
      // The other edge learns "no connection" and keeps it...
      expect(await keySentBy(otherEdge)).toBe('platform-key-000000');
      // ...until a connection made through the first edge is announced.
      expectOk(await connect(account.fullKey, apiId, { apiKey: BYO }), 201);
      await until('the other edge sends the new key', async () => (await keySentBy(otherEdge)) === BYO, 1_000);
      expect(await keySentBy(edge)).toBe(BYO);

      // A change nobody announces (SQL by hand) is not seen while the entry lives: the row is not read per call.
      const sealed = sealSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, 'changed-by-hand-000', connectionContext(account.accountId, apiId));
      await app.deps.sql`update connections set key_encrypted = ${sealed} where account_id = ${account.accountId} and api_id = ${apiId}`;
      expect(await keySentBy(otherEdge)).toBe(BYO);
      expect(await keySentBy(edge)).toBe(BYO);

      // Disconnecting through the other edge: that edge falls back at once, the first within a second.
      expectOk(await other.inject({ method: 'DELETE', url: `/api/v1/connect/${apiId}`, headers: bearer(account.fullKey) }));
      expect(await keySentBy(otherEdge)).toBe('platform-key-000000');
      await until('the first edge falls back to the platform key', async () => (await keySentBy(edge)) === 'platform-key-000000', 1_000);
    } finally {
      await other.close();
    }
  });

  it('answers 404 for an unknown API, 400 for bad input and odd ids, 403 for agent keys, 401 without a key', async () => {
    const account = await createTestAccount(app.deps.sql);
    expectError(await connect(account.fullKey, 'no-such-api-zz', { apiKey: 'k-123456789012' }), 404, 'not_found');
    expectError(await connect(account.fullKey, 'Bad$Id', { apiKey: 'k-123456789012' }), 400, 'validation_failed');
    expectError(await connect(account.fullKey, apiId, {}), 400, 'validation_failed');
    expectError(await connect(account.fullKey, apiId, { apiKey: '' }), 400, 'validation_failed');
    expectError(await connect(account.fullKey, apiId, { apiKey: 42 }), 400, 'validation_failed');
    expectError(await connect(account.fullKey, apiId, { apiKey: 'x'.repeat(5000) }), 400, 'validation_failed');
    const agent = await createTestAccount(app.deps.sql, { keyKind: 'agent' });
    expectError(await connect(agent.fullKey, apiId, { apiKey: 'k-123456789012' }), 403, 'agent_key_forbidden');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/me/apis', headers: bearer(agent.fullKey) }), 403, 'agent_key_forbidden');
    expectError(await app.inject({ method: 'POST', url: `/api/v1/connect/${apiId}`, payload: { apiKey: 'k' } }), 401);
  });

  it('seals with AES-256-GCM: a tampered blob or another master key does not open', () => {
    const key = Buffer.alloc(32, 7);
    const sealed = sealSecret(key, 'secret', 'ctx');
    expect(openSecret(key, sealed, 'ctx')).toBe('secret');
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => openSecret(key, tampered, 'ctx')).toThrow();
    expect(() => openSecret(Buffer.alloc(32, 8), sealed, 'ctx')).toThrow();
  });
});
