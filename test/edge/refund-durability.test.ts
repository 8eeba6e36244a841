import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileRefunds, refundChargeJob, refundOrQueue } from '#core/billing';
import { createQueue, createRedis } from '#core/platform';
import { charge } from '#db/ledger';
import { recordUsageEvents } from '#db/usage';
import { createSql, type Sql } from '#db/sql';
import { refundProcessor } from '#workers/queues/refunds';
import { bearer, createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

// No refund is ever lost: Postgres is cut off (through a TCP proxy this test controls, never the
// shared server) at the moment a failed call's refund is owed.

describe('refunds survive Postgres failing at the moment they are owed', () => {
  let pg: TcpProxy;
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let sql: Sql;
  let redis: Redis;
  let prefix: string;
  let account: TestAccount;
  let api: string;

  beforeAll(async () => {
    const direct = new URL(testDatabaseUrl());
    pg = await startTcpProxy(direct.hostname, Number(direct.port || 5432));
    const viaProxy = new URL(direct);
    viaProxy.port = String(pg.port);
    sql = createSql(direct.toString(), { max: 2 });
    prefix = uniqueId('refunds');
    redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    upstream = await startUpstream((req, res) => {
      // The upstream fails, and Postgres goes away just before its answer arrives: the charge is
      // committed, the refund is owed and cannot be written.
      if (req.url?.includes('fail')) pg.cut();
      res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'text/plain' });
      res.end('upstream says no');
    });
    app = await createTestApp({
      DATABASE_URL: viaProxy.toString(),
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: prefix,
      API_CACHE_TTL_MS: '600000',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(sql, { balanceMicros: 100_000n });
    api = await registerApi({ baseUrl: upstream.url, price: '0.004' });
  });
  afterAll(async () => {
    pg?.restore();
    await app?.close();
    await upstream?.close();
    await pg?.close();
    await redis?.quit();
    await sql?.end();
  });

  const refundsOf = (chargeId: string) => sql<{ id: string }[]>`select id from ledger_entries where refund_of = ${chargeId}`;

  it("answers the caller's 502 (never a 500), queues the refund, and the ledger holds it exactly once after recovery", async () => {
    // Warm the edge's API cache while Postgres is reachable.
    expect((await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}/ok`, headers: bearer(account.fullKey) })).status).toBe(200);
    const res = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}/fail`, headers: bearer(account.fullKey) });
    expect(res.status, res.body.toString()).toBe(502);
    const body = JSON.parse(res.body.toString()) as { code: string; chargeId: string; refund: string };
    expect(body).toMatchObject({ code: 'upstream_error', refund: 'pending' });
    expect(await refundsOf(body.chargeId)).toHaveLength(0);

    pg.restore();
    const queue = new Queue(refundChargeJob.queue, { connection: redis, prefix });
    const job = await Job.fromId(queue, `refund-${body.chargeId}`);
    expect(job?.data).toMatchObject({ chargeId: body.chargeId });
    const events = new QueueEvents(refundChargeJob.queue, {
      connection: createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue'),
      prefix,
    });
    await events.waitUntilReady();
    const processor = refundProcessor({ sql });
    const worker = new Worker(processor.job.queue, processor.process, { connection: redis, prefix });
    try {
      await job!.waitUntilFinished(events, 30_000);
    } finally {
      await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
    expect(await refundsOf(body.chargeId)).toHaveLength(1);
    // Only the served call is paid for.
    const [row] = await sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${account.accountId}`;
    expect(row!.b).toBe(100_000n - 4_000n);
    // Nothing is refunded twice, however often the reconciler runs.
    await reconcileRefunds(sql, 0);
    expect(await refundsOf(body.chargeId)).toHaveLength(1);
  });

  it('answers without waiting for Redis when neither Postgres nor Redis takes the refund: the reconciler settles it later', async () => {
    const postgresAway = createSql('postgres://postgres@127.0.0.1:1/none', { max: 1 });
    const redisAway = createRedis('redis://127.0.0.1:1', 'request-path');
    const queue = createQueue(refundChargeJob.queue, { connection: redisAway, prefix });
    const errors: string[] = [];
    try {
      const started = Date.now();
      const outcome = await refundOrQueue(postgresAway, queue, randomUUID(), 'refund: test', { error: (_object, message) => errors.push(message) });
      expect(outcome).toEqual({ refunded: false, queued: false });
      expect(Date.now() - started).toBeLessThan(6_000);
      expect(errors).toEqual(['refund could not be written or queued; the reconciler will settle it']);
    } finally {
      redisAway.disconnect();
      void queue.close().catch(() => {});
      await postgresAway.end({ timeout: 1 });
    }
  });

  it('reconciles a charge with no recorded outcome, and leaves charged calls alone', async () => {
    const who = await createTestAccount(sql, { balanceMicros: 50_000n });
    const orphan = await charge(sql, { accountId: who.accountId, costMicros: 1_000n, keyId: who.keyId, apiId: api, item: 'proxy' });
    const served = await charge(sql, { accountId: who.accountId, costMicros: 2_000n, keyId: who.keyId, apiId: api, item: 'proxy' });
    if (!orphan.ok || !served.ok) throw new Error('charges refused');
    await recordUsageEvents(sql, [
      {
        id: crypto.randomUUID(),
        accountId: who.accountId,
        keyId: who.keyId,
        apiId: api,
        item: 'proxy',
        status: 200,
        latencyMs: 1,
        bytesIn: 0,
        bytesOut: 2,
        costMicros: '2000',
        chargeId: served.chargeId,
        at: new Date().toISOString(),
      },
    ]);
    expect(await reconcileRefunds(sql, 0)).toBeGreaterThanOrEqual(1);
    expect(await refundsOf(orphan.chargeId)).toHaveLength(1);
    expect(await refundsOf(served.chargeId)).toHaveLength(0);
    await reconcileRefunds(sql, 0);
    expect(await refundsOf(orphan.chargeId)).toHaveLength(1);
  });
});
