import type { AddressInfo } from 'node:net';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { usageProcessor } from '#workers/queues/usage';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

const CALLS = 2_000;
const PRICE_MICROS = 1_000n;
const AFFORDABLE = 1_234;

describe('the proxy under 2,000 concurrent charged calls', () => {
  let app: FastifyInstance;
  let upstream: TestUpstream;
  let pool: Pool;
  let workerRedis: Redis;
  let worker: Worker;

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    const prefix = uniqueId('conc');
    // 2,000 calls on one key in seconds: the per-key rate limit is set out of the way explicitly.
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: prefix,
      DATABASE_POOL_MAX: '16',
      USAGE_FLUSH_MS: '50',
      RATE_LIMIT_KEY_MAX: '1000000',
      RATE_LIMIT_ACCOUNT_MAX: '1000000',
      RATE_LIMIT_PUBLIC_MAX: '1000000',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    pool = new Pool(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, { connections: 64, keepAliveTimeout: 30_000 });
    workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const definition = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(definition.job.queue, definition.process, { connection: workerRedis, prefix, concurrency: 4 });
  });
  afterAll(async () => {
    await pool.close();
    await worker.close();
    await app.close();
    await workerRedis.quit();
    await upstream.close();
  });

  it('lets exactly the affordable calls through, answers the rest 402, and usage matches the ledger', async () => {
    const apiId = await registerApi({ baseUrl: upstream.url, price: '0.001' });
    const account = await createTestAccount(app.deps.sql, { balanceMicros: PRICE_MICROS * BigInt(AFFORDABLE) });
    const { sql } = app.deps;

    let lowest: bigint | null = null;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${account.accountId}`;
        if (lowest === null || row!.b < lowest) lowest = row!.b;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    const results = await Promise.all(
      Array.from({ length: CALLS }, async (_, i) => {
        const res = await pool.request({
          method: 'GET',
          path: `/api/v1/proxy/${apiId}/items/${i}?n=${i}`,
          headers: { 'x-api-key': account.fullKey },
        });
        const text = await res.body.text();
        return { status: res.statusCode, chargeId: res.headers['x-service-charge-id'] as string | undefined, body: text };
      }),
    );
    sampling = false;
    await sampler;

    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    const other = results.filter((r) => r.status !== 200 && r.status !== 402);
    expect(other.slice(0, 3), 'only 200 and 402 are expected').toEqual([]);
    expect(ok.length).toBe(AFFORDABLE);
    expect(refused.length).toBe(CALLS - AFFORDABLE);
    for (const r of refused) expect(JSON.parse(r.body)).toMatchObject({ ok: false, code: 'insufficient_balance', cost: 0.001 });
    expect(new Set(ok.map((r) => r.chargeId)).size).toBe(AFFORDABLE);
    expect(upstream.seen.length).toBe(AFFORDABLE);
    expect(lowest! >= 0n).toBe(true);

    const [ledger] = await sql<{ sum: bigint; charges: bigint; balance: bigint }[]>`
      select (select sum(amount_micros) from ledger_entries where account_id = ${account.accountId})::bigint as sum,
             (select count(*) from ledger_entries where account_id = ${account.accountId} and kind = 'charge')::bigint as charges,
             (select balance_micros from accounts where id = ${account.accountId}) as balance`;
    expect(ledger).toEqual({ sum: 0n, charges: BigInt(AFFORDABLE), balance: 0n });
    // A busy account: most calls were charged from credit holds, each with its own ledger row, and
    // once the money ran out the holds were closed with nothing left held.
    const [held] = await sql<{ fromHolds: number; heldMicros: bigint; openHolds: number }[]>`
      select (select count(*)::int from ledger_entries where account_id = ${account.accountId} and kind = 'charge' and hold_id is not null) as "fromHolds",
             (select held_micros from accounts where id = ${account.accountId}) as "heldMicros",
             (select count(*)::int from credit_holds where account_id = ${account.accountId} and closed_at is null) as "openHolds"`;
    expect(held!.fromHolds).toBeGreaterThan(AFFORDABLE / 2);
    expect(held).toMatchObject({ heldMicros: 0n, openHolds: 0 });

    await app.usage.flush();
    await expect
      .poll(
        async () =>
          (
            await sql<{ calls: bigint }[]>`select coalesce(sum(calls), 0)::bigint as calls from usage_daily where account_id = ${account.accountId}`
          )[0]!.calls,
        {
          timeout: 20_000,
          interval: 100,
        },
      )
      .toBe(BigInt(AFFORDABLE));
    const [usage] = await sql<{ cost: bigint; events: bigint }[]>`
      select (select sum(cost_micros) from usage_daily where account_id = ${account.accountId})::bigint as cost,
             (select count(*) from usage_events where account_id = ${account.accountId})::bigint as events`;
    expect(usage).toEqual({ cost: PRICE_MICROS * BigInt(AFFORDABLE), events: BigInt(AFFORDABLE) });
  }, 120_000);
});
