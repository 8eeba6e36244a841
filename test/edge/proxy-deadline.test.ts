import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * PROXY_MAX_CALL_MS bounds the phases of a proxied call that the caller controls: sending the body
 * and reading the answer. Without it an answer read slowly for longer than the workers'
 * REFUND_RECONCILE_AFTER_SECONDS would have no recorded outcome at that age, and the reconciler
 * would refund a call that was served. A request forwarded whole is never refunded for lateness:
 * the upstream may have done the work (sent the SMS).
 */
describe('the proxy deadline (PROXY_MAX_CALL_MS)', () => {
  const MAX_CALL_MS = 1_000;
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let apiId: string;

  beforeAll(async () => {
    upstream = await startUpstream((req, res, seen) => {
      const route = (req.url ?? '').replace(/^\/base/, '');
      if (route === '/silent') {
        // Answers after 3 s: within the headers timeout below, beyond the deadline.
        setTimeout(() => !res.destroyed && res.end('late'), 3_000).unref();
      } else if (route === '/after-body') {
        // Called once the whole body arrived; answers 1.2 s later, past the deadline however early the body came.
        setTimeout(() => !res.destroyed && res.end(`got ${seen.bodyBytes} bytes`), 1_200).unref();
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

  /** Sends `chunks` chunks of 100 bytes, one every `everyMs`, and resolves with the answer. */
  const trickleUpload = (key: string, chunks: number, everyMs: number) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        `${edge}/api/v1/proxy/${apiId}/after-body`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
          agent: false,
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (chunk: Buffer) => parts.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      let sent = 0;
      const timer = setInterval(() => {
        if (req.destroyed) return clearInterval(timer);
        req.write(Buffer.alloc(100, 1));
        sent += 1;
        if (sent === chunks) {
          clearInterval(timer);
          req.end();
        }
      }, everyMs);
    });

  it('waits for the upstream past the deadline once the request went out whole: served and charged, not refunded', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const res = await rawRequest(edge, {
      method: 'GET',
      path: `/api/v1/proxy/${apiId}/silent`,
      headers: { authorization: `Bearer ${account.fullKey}` },
    });
    expect(res.status, res.body.toString('utf8')).toBe(200);
    expect(res.body.toString('utf8')).toBe('late');
    expect(await kinds(account.accountId)).toEqual(['adjustment', 'charge']);
    await expect.poll(() => eventsOf(account.accountId), { timeout: 3_000, interval: 100 }).toEqual([{ status: 200, costMicros: '2000' }]);
  });

  it('never refunds a call for a slow upload that ended before the deadline, however late the upstream then answers', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    // The last byte lands at about 0.3 s (leaving a loaded machine 0.7 s to pass it on); the upstream
    // answers 1.2 s later, past the 1 s deadline.
    const res = await trickleUpload(account.fullKey, 3, 100);
    expect(res.status, res.body).toBe(200);
    expect(res.body).toBe('got 300 bytes');
    expect(await kinds(account.accountId)).toEqual(['adjustment', 'charge']);
    await expect.poll(() => eventsOf(account.accountId), { timeout: 3_000, interval: 100 }).toEqual([{ status: 200, costMicros: '2000' }]);
  });

  it('refunds a call whose body had not all arrived by the deadline (the upstream never had the whole request)', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const started = performance.now();
    const res = await trickleUpload(account.fullKey, 30, 100).catch(() => ({ status: 0, body: '' }));
    const took = performance.now() - started;
    expect(res.status, res.body).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({
      ok: false,
      code: 'upstream_unavailable',
      error: expect.stringContaining('did not complete within 1 s'),
    });
    expect(took).toBeLessThan(2_900);
    expect(await kinds(account.accountId)).toEqual(['adjustment', 'charge', 'refund']);
    await expect.poll(() => eventsOf(account.accountId), { timeout: 3_000, interval: 100 }).toEqual([{ status: 503, costMicros: '0' }]);
  });

  it('cuts an answer still streaming at the deadline; the call keeps its charge and its outcome is recorded at once', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const started = performance.now();
    const received = await new Promise<{ bytes: number; complete: boolean }>((resolve, reject) => {
      const req = request(
        `${edge}/api/v1/proxy/${apiId}/trickle`,
        { headers: { authorization: `Bearer ${account.fullKey}` }, agent: false },
        (res) => {
          let bytes = 0;
          res.on('data', (chunk: Buffer) => (bytes += chunk.length));
          res.on('error', () => {});
          res.on('close', () => resolve({ bytes, complete: res.complete }));
        },
      );
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
    const next = await rawRequest(edge, {
      method: 'GET',
      path: `/api/v1/proxy/${apiId}/hello`,
      headers: { authorization: `Bearer ${account.fullKey}` },
    });
    expect(next.status).toBe(200);
  });
});
