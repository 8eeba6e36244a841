import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * PROXY_MAX_CALL_MS bounds a proxied call from its charge to the last byte of its answer. Without it
 * an answer read slowly for longer than the workers' REFUND_RECONCILE_AFTER_SECONDS would have no
 * recorded outcome at that age, and the reconciler would refund a call that was served.
 */
describe('the proxy deadline (PROXY_MAX_CALL_MS)', () => {
  const MAX_CALL_MS = 1_000;
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let apiId: string;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const route = (req.url ?? '').replace(/^\/base/, '');
      if (route === '/silent') {
        // Answers after 3 s: within the headers timeout below, beyond the deadline.
        setTimeout(() => !res.destroyed && res.end('late'), 3_000).unref();
      } else if (route === '/trickle') {
        // An endless answer, a chunk every 50 ms: never silent long enough for the body timeout.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const timer = setInterval(() => res.write(Buffer.alloc(1024, 7)), 50);
        res.on('close', () => clearInterval(timer));
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
      }
    });
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('deadline'),
      PROXY_MAX_CALL_MS: String(MAX_CALL_MS),
      PROXY_HEADERS_TIMEOUT_MS: '10000',
      PROXY_BODY_TIMEOUT_MS: '10000',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    apiId = await registerApi({ baseUrl: `${upstream.url}/base`, price: '0.002' });
  });
  afterAll(async () => {
    await app.close();
    await upstream.close();
  });

  const kinds = async (accountId: string) =>
    (await app.deps.sql<{ kind: string }[]>`select kind from ledger_entries where account_id = ${accountId} order by seq`).map((e) => e.kind);
  /** The usage events handed to the queue for a charge. */
  const eventsOf = async (accountId: string) => {
    await app.usage.flush();
    const jobs = await app.usage.queue.getJobs(['waiting', 'active', 'completed', 'delayed']);
    return jobs
      .flatMap((job) => (job.data as { events: { accountId: string; status: number; costMicros: string }[] }).events)
      .filter((e) => e.accountId === accountId)
      .map((e) => ({ status: e.status, costMicros: e.costMicros }));
  };

  it('ends a call whose upstream has not answered by the deadline: 503, refunded, with its outcome recorded', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const started = performance.now();
    const res = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/silent`, headers: { authorization: `Bearer ${account.fullKey}` } });
    const took = performance.now() - started;
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ ok: false, code: 'upstream_unavailable', error: expect.stringContaining('did not complete within 1 s') });
    expect(took).toBeGreaterThanOrEqual(MAX_CALL_MS - 50);
    expect(took).toBeLessThan(2_900);
    expect(await kinds(account.accountId)).toEqual(['adjustment', 'charge', 'refund']);
    await expect.poll(() => eventsOf(account.accountId), { timeout: 3_000, interval: 100 }).toEqual([{ status: 503, costMicros: '0' }]);
  });

  it('cuts an answer still streaming at the deadline; the call keeps its charge and its outcome is recorded at once', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const started = performance.now();
    const received = await new Promise<{ bytes: number; complete: boolean }>((resolve, reject) => {
      const req = request(`${edge}/api/v1/proxy/${apiId}/trickle`, { headers: { authorization: `Bearer ${account.fullKey}` }, agent: false }, (res) => {
        let bytes = 0;
        res.on('data', (chunk: Buffer) => (bytes += chunk.length));
        res.on('error', () => {});
        res.on('close', () => resolve({ bytes, complete: res.complete }));
      });
      req.on('error', reject);
      req.end();
      setTimeout(() => reject(new Error('the answer was not cut within 5 s')), 5_000).unref();
    });
    const took = performance.now() - started;
    expect(received.complete).toBe(false);
    expect(received.bytes).toBeGreaterThan(0);
    expect(took).toBeGreaterThanOrEqual(MAX_CALL_MS - 50);
    expect(took).toBeLessThan(3_000);
    await expect.poll(() => eventsOf(account.accountId), { timeout: 3_000, interval: 100 }).toEqual([{ status: 200, costMicros: '2000' }]);
    expect(await kinds(account.accountId)).toEqual(['adjustment', 'charge']);
    // The edge goes on serving.
    const next = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/hello`, headers: { authorization: `Bearer ${account.fullKey}` } });
    expect(next.status).toBe(200);
  });
});
