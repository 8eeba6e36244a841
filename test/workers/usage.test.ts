import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Job, Queue, Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageRecorder, usageBatchJob } from '#core/billing';
import { createRedis } from '#core/platform';
import { createSql } from '#db/sql';
import { recordUsageEvents, type UsageEvent } from '#db/usage';
import { usageProcessor } from '#workers/queues/usage';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

const event = (accountId: string, apiId: string, overrides: Partial<UsageEvent> = {}): UsageEvent => ({
  id: randomUUID(),
  accountId,
  keyId: null,
  apiId,
  item: 'proxy',
  status: 200,
  latencyMs: 10,
  bytesIn: 1,
  bytesOut: 2,
  costMicros: '1000',
  chargeId: null,
  at: new Date().toISOString(),
  ...overrides,
});

describe('the usage pipeline', () => {
  let app: FastifyInstance;
  let upstream: TestUpstream;
  let edge: string;
  let prefix: string;
  let workerRedis: Redis;
  let worker: Worker;

  beforeAll(async () => {
    prefix = uniqueId('usage');
    upstream = await startUpstream((req, res) => {
      const status = req.url?.includes('fail') ? 500 : req.url?.includes('missing') ? 404 : 200;
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end('x'.repeat(100));
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, USAGE_FLUSH_MS: '20' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const definition = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(definition.job.queue, definition.process, { connection: workerRedis, prefix, concurrency: 2 });
  });
  afterAll(async () => {
    await worker.close();
    await app.close();
    await workerRedis.quit();
    await upstream.close();
  });

  it('aggregates metered calls per account, API and day, and the usage endpoints answer from it', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const apiA = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    const apiB = await registerApi({ baseUrl: upstream.url, price: '0.005' });
    const call = (api: string, path: string) =>
      rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}${path}`, headers: bearer(account.fullKey) });
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await call(apiA, '/ok')).status);
    statuses.push((await call(apiA, '/missing')).status, (await call(apiA, '/fail')).status, (await call(apiB, '/ok')).status);
    expect(statuses).toEqual([200, 200, 200, 404, 502, 200]);
    await app.usage.flush();

    const usage = async () =>
      expectOk<{
        totals: { calls: number; cost: number; errors: number };
        byApi: Array<{ apiId: string; calls: number; cost: number; errors: number }>;
        byDay: Array<{ date: string; calls: number }>;
      }>(await app.inject({ method: 'GET', url: '/api/v1/usage', headers: bearer(account.fullKey) }));
    await expect.poll(async () => (await usage()).totals.calls, { timeout: 10_000, interval: 50 }).toBe(6);
    const summary = await usage();
    // 4 charged calls to A (the 502 was refunded) and one to B: the ledger's spend.
    expect(summary.totals).toEqual({ calls: 6, cost: 0.013, errors: 2 });
    expect(summary.byApi).toEqual([
      { apiId: apiA, calls: 5, cost: 0.008, errors: 2 },
      { apiId: apiB, calls: 1, cost: 0.005, errors: 0 },
    ]);
    expect(summary.byDay).toEqual([{ date: new Date().toISOString().slice(0, 10), calls: 6, cost: 0.013, errors: 2 }]);
    const [spent] = await app.deps.sql<
      { s: bigint }[]
    >`select -sum(amount_micros)::bigint as s from ledger_entries where account_id = ${account.accountId} and kind in ('charge', 'refund')`;
    expect(spent!.s).toBe(13_000n);

    const one = expectOk<{ apiId: string; totals: unknown; byDay: unknown[] }>(
      await app.inject({ method: 'GET', url: `/api/v1/usage/${apiB}?days=7`, headers: bearer(account.fullKey) }),
    );
    expect(one).toMatchObject({ apiId: apiB, days: 7, totals: { calls: 1, cost: 0.005, errors: 0 } });
    const stats = expectOk<{ stats: Record<string, unknown> }>(
      await app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: bearer(account.fullKey) }),
    );
    expect(stats.stats).toMatchObject({
      totalCalls: 6,
      totalCost: 0.013,
      errorRate: 0.3333,
      topApis: [
        { apiId: apiA, calls: 5, cost: 0.008 },
        { apiId: apiB, calls: 1, cost: 0.005 },
      ],
    });
    expect(stats.stats.avgLatencyMs).toEqual(expect.any(Number));
    expect(stats.stats.p95LatencyMs as number).toBeGreaterThanOrEqual(0);
    const [{ bytes_out: bytesOut } = { bytes_out: 0n }] = await app.deps.sql<{ bytes_out: bigint }[]>`
      select sum(bytes_out)::bigint as bytes_out from usage_daily where account_id = ${account.accountId} and api_id = ${apiB}`;
    expect(bytesOut).toBe(100n);

    // Another account sees none of it.
    const stranger = await createTestAccount(app.deps.sql);
    expect(
      expectOk<{ totals: { calls: number } }>(await app.inject({ method: 'GET', url: '/api/v1/usage', headers: bearer(stranger.fullKey) })).totals
        .calls,
    ).toBe(0);
  });

  it('validates days and the api id', async () => {
    const account = await createTestAccount(app.deps.sql);
    for (const days of ['0', '366', '-1', '1.5', 'abc', '']) {
      expectError(await app.inject({ method: 'GET', url: `/api/v1/usage?days=${days}`, headers: bearer(account.fullKey) }), 400, 'validation_failed');
    }
    expect(expectOk<{ days: number }>(await app.inject({ method: 'GET', url: '/api/v1/usage', headers: bearer(account.fullKey) })).days).toBe(30);
    expect(
      expectOk<{ days: number }>(await app.inject({ method: 'GET', url: '/api/v1/usage?days=365', headers: bearer(account.fullKey) })).days,
    ).toBe(365);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/usage/no-such-api-zz', headers: bearer(account.fullKey) }), 404, 'not_found');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/usage/Bad$Id', headers: bearer(account.fullKey) }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/usage/stats?days=0', headers: bearer(account.fullKey) }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/usage' }), 401, 'missing_credentials');
  });

  it('never counts a job twice: the processor run again on the same job, or a batch that failed halfway', async () => {
    const account = await createTestAccount(app.deps.sql);
    const apiId = uniqueId('api-');
    const queuePrefix = uniqueId('usage-idem');
    const connection = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const queue = new Queue(usageBatchJob.queue, { connection, prefix: queuePrefix });
    try {
      const events = Array.from({ length: 5 }, () => event(account.accountId, apiId));
      const added = await queue.add(usageBatchJob.name, { events });
      const job = (await Job.fromId(queue, added.id!))!;
      const definition = usageProcessor({ sql: app.deps.sql });
      expect(await definition.process(job)).toEqual({ events: 5, inserted: 5 });
      expect(await definition.process(job)).toEqual({ events: 5, inserted: 0 });

      // A batch whose last event cannot be written (unknown account) rolls back as a whole, like a
      // worker killed mid-batch: nothing of it is counted; its retry counts only the new events.
      const fresh = [event(account.accountId, apiId), event(account.accountId, apiId)];
      const broken = await queue.add(usageBatchJob.name, { events: [...events.slice(0, 2), ...fresh, event(randomUUID(), apiId)] });
      await expect(definition.process((await Job.fromId(queue, broken.id!))!)).rejects.toThrow();
      const retried = await queue.add(usageBatchJob.name, { events: [...events.slice(0, 2), ...fresh] });
      expect(await definition.process((await Job.fromId(queue, retried.id!))!)).toEqual({ events: 4, inserted: 2 });

      const [daily] = await app.deps.sql<{ calls: bigint; cost: bigint }[]>`
        select calls, cost_micros as cost from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}`;
      expect(daily).toEqual({ calls: 7n, cost: 7_000n });

      const invalid = await queue.add(usageBatchJob.name, { events: [{ nope: true }] } as never);
      await expect(definition.process((await Job.fromId(queue, invalid.id!))!)).rejects.toThrow(/invalid usage-batch job/);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await connection.quit();
    }
  });

  it('stores every field as given, awkward text and absent fields included (the batch travels as one array per column)', async () => {
    const account = await createTestAccount(app.deps.sql);
    const apiId = uniqueId('api-');
    const awkward = ['/a,b/{c}/"quoted"/back\\slash', 'NULL', '', '/naïve/日本/🚀', "/it's"];
    const events = awkward.map((path, i) =>
      event(account.accountId, apiId, {
        path,
        method: i % 2 ? 'POST' : 'GET',
        keyId: i === 0 ? null : `key_${i}`,
        chargeId: i === 1 ? null : randomUUID(),
        holdId: i === 2 ? randomUUID() : undefined,
        outcome: i === 3 ? 'failed' : 'served',
        errorCode: i === 3 ? 'upstream_unreachable' : null,
        chargedMicros: i === 4 ? null : '1000',
        paidWith: i === 4 ? 'x402' : 'balance',
        status: 200 + i,
        latencyMs: i,
        bytesIn: 10 * i,
        bytesOut: 100 * i,
        costMicros: String(1000 + i),
      }),
    );
    expect(await recordUsageEvents(app.deps.sql, events)).toBe(events.length);
    const rows = await app.deps.sql<Record<string, unknown>[]>`
      select id, key_id, path, method, charge_id, hold_id, outcome, error_code, charged_micros, paid_with, status, latency_ms, bytes_in, bytes_out, cost_micros, at
        from usage_events where account_id = ${account.accountId} order by status`;
    expect(rows).toEqual(
      events.map((e) => ({
        id: e.id,
        key_id: e.keyId,
        path: e.path,
        method: e.method,
        charge_id: e.chargeId,
        hold_id: e.holdId ?? null,
        outcome: e.outcome,
        error_code: e.errorCode,
        charged_micros: e.chargedMicros === null ? null : BigInt(e.chargedMicros!),
        paid_with: e.paidWith,
        status: e.status,
        latency_ms: e.latencyMs,
        bytes_in: BigInt(e.bytesIn),
        bytes_out: BigInt(e.bytesOut),
        cost_micros: BigInt(e.costMicros),
        at: new Date(e.at),
      })),
    );
  });

  it('counts nothing of a batch whose worker process is killed mid-transaction, and the retry counts it once', async () => {
    const account = await createTestAccount(app.deps.sql);
    const apiId = uniqueId('api-');
    const events = Array.from({ length: 50 }, () => event(account.accountId, apiId));
    const appName = uniqueId('doomed-worker');
    // Another transaction holds the day's aggregate row, so the worker stops right after inserting its events.
    let inserted!: () => void;
    const blockerReady = new Promise<void>((resolve) => (inserted = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const blocker = app.deps.sql
      .begin(async (tx) => {
        await tx`insert into usage_daily (account_id, api_id, day) values (${account.accountId}, ${apiId}, (now() at time zone 'UTC')::date)`;
        inserted();
        await held;
        throw new Error('roll back the blocker');
      })
      .catch(() => {});
    await blockerReady;
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/usage-batch-process.ts'], {
      env: { ...process.env, USAGE_BATCH: JSON.stringify({ events }), USAGE_APP_NAME: appName },
      stdio: 'ignore',
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    try {
      await expect
        .poll(
          async () => (await app.deps.sql`select 1 from pg_stat_activity where application_name = ${appName} and wait_event_type = 'Lock'`).length,
          { timeout: 15_000, interval: 25 },
        )
        .toBe(1);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    } finally {
      release();
      await blocker;
      child.kill('SIGKILL');
    }
    // Once the lock is free the dead session's statement ends, Postgres finds the client gone and
    // rolls its transaction back.
    await expect
      .poll(async () => (await app.deps.sql`select 1 from pg_stat_activity where application_name = ${appName}`).length, {
        timeout: 5_000,
        interval: 25,
      })
      .toBe(0);
    const [{ n } = { n: -1n }] = await app.deps.sql<
      { n: bigint }[]
    >`select count(*)::bigint as n from usage_events where account_id = ${account.accountId}`;
    expect(n).toBe(0n);
    expect(await recordUsageEvents(app.deps.sql, events)).toBe(50);
    expect(await recordUsageEvents(app.deps.sql, events)).toBe(0);
    const [daily] = await app.deps.sql<
      { calls: bigint }[]
    >`select calls from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}`;
    expect(daily?.calls).toBe(50n);
  }, 30_000);

  it('writes events straight to Postgres when Redis is down, losing none', async () => {
    const account = await createTestAccount(app.deps.sql);
    const apiId = uniqueId('api-');
    const deadRedis = createRedis('redis://127.0.0.1:1', 'request-path', { enableOfflineQueue: false, retryStrategy: () => 200 });
    const recorder = new UsageRecorder({
      sql: app.deps.sql,
      redis: deadRedis,
      prefix: uniqueId('dead'),
      batchSize: 3,
      flushMs: 10,
      bufferMax: 1000,
      log: pino({ level: 'silent' }),
      addTimeoutMs: 300,
    });
    try {
      for (let i = 0; i < 7; i += 1) recorder.record(event(account.accountId, apiId, { costMicros: '500' }));
      await recorder.flush();
      expect(recorder.pending).toBe(0);
      const [daily] = await app.deps.sql<{ calls: bigint; cost: bigint }[]>`
        select calls, cost_micros as cost from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}`;
      expect(daily).toEqual({ calls: 7n, cost: 3_500n });
    } finally {
      await recorder.close();
      deadRedis.disconnect();
    }
  });

  it('keeps events in memory while Redis and Postgres both refuse them, and writes them once Postgres is back', async () => {
    const account = await createTestAccount(app.deps.sql);
    const apiId = uniqueId('api-');
    const deadRedis = createRedis('redis://127.0.0.1:1', 'request-path', { enableOfflineQueue: false, retryStrategy: () => 200 });
    const deadSql = createSql('postgres://postgres@127.0.0.1:1/none', { max: 1 });
    const options = {
      sql: deadSql,
      redis: deadRedis,
      prefix: uniqueId('dead'),
      batchSize: 2,
      flushMs: 10,
      bufferMax: 1000,
      log: pino({ level: 'silent' }),
      addTimeoutMs: 200,
    };
    const recorder = new UsageRecorder(options);
    try {
      for (let i = 0; i < 5; i += 1) recorder.record(event(account.accountId, apiId));
      await recorder.flush();
      expect(recorder.pending).toBe(5);
      options.sql = app.deps.sql; // Postgres is back
      await recorder.flush();
      expect(recorder.pending).toBe(0);
      const [daily] = await app.deps.sql<
        { calls: bigint }[]
      >`select calls from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}`;
      expect(daily?.calls).toBe(5n);
    } finally {
      await recorder.close();
      deadRedis.disconnect();
      await deadSql.end({ timeout: 1 });
    }
  });

  it('keeps charging correctly with Redis down, and the usage still lands in Postgres', async () => {
    const offline = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_URL: 'redis://127.0.0.1:1',
      USAGE_QUEUE_TIMEOUT_MS: '200',
      USAGE_FLUSH_MS: '20',
    });
    try {
      await offline.listen({ host: '127.0.0.1', port: 0 });
      const offlineEdge = `http://127.0.0.1:${(offline.server.address() as AddressInfo).port}`;
      const account = await createTestAccount(offline.deps.sql, { balanceMicros: 5_000n });
      const apiId = await registerApi({ baseUrl: upstream.url, price: '0.002' });
      const statuses = [];
      for (let i = 0; i < 3; i += 1)
        statuses.push((await rawRequest(offlineEdge, { method: 'GET', path: `/api/v1/proxy/${apiId}/ok`, headers: bearer(account.fullKey) })).status);
      expect(statuses).toEqual([200, 200, 402]);
      await offline.usage.flush();
      const [row] = await offline.deps.sql<{ calls: bigint; cost: bigint; balance: bigint }[]>`
        select (select calls from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}) as calls,
               (select cost_micros from usage_daily where account_id = ${account.accountId} and api_id = ${apiId}) as cost,
               (select balance_micros from accounts where id = ${account.accountId}) as balance`;
      expect(row).toEqual({ calls: 2n, cost: 4_000n, balance: 1_000n });
    } finally {
      await offline.close();
    }
  });
});
