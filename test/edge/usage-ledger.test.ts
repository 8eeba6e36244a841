import type { AddressInfo } from 'node:net';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_USAGE_API } from '#core/billing';
import { createRedis } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { usageProcessor } from '#workers/queues/usage';
import { bearer, createTestAccount, createTestApp, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// Every charge is usage: for any account, usage totals equal the ledger's debits minus refunds, and
// the priced items that are not proxy calls (instructions, doc sections, cookbook details) show too.

interface Totals {
  calls: number;
  cost: number;
}

describe('usage equals the ledger', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let worker: Worker;

  beforeAll(async () => {
    const prefix = uniqueId('usageledger');
    upstream = await startUpstream((req, res) => {
      res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, USAGE_FLUSH_MS: '20' });
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix, concurrency: 2 });
  });
  afterAll(async () => {
    await worker?.close();
    await app?.close();
    await workerRedis?.quit();
    await upstream?.close();
  });

  it('counts proxy calls (refunded ones at zero), instructions, doc sections and cookbook details, and the sums match the ledger', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const api = await registerApi({ baseUrl: upstream.url, price: '0.003' });
    const headers = bearer(account.fullKey);
    const get = (url: string) => app.inject({ method: 'GET', url, headers });
    expect((await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}/ok`, headers })).status).toBe(200);
    expect((await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}/fail`, headers })).status).toBe(502);
    expectOk(await get(`/api/v1/apis/${api}/instructions`));
    expectOk(await get('/api/v1/docs/keys'));
    expectOk(await get('/api/v1/cookbooks/weather-alert-sms'));

    const [ledger] = await app.deps.sql<{ net: bigint }[]>`
      select -coalesce(sum(amount_micros), 0)::bigint as net from ledger_entries
       where account_id = ${account.accountId} and kind in ('charge', 'refund')`;
    // 0.003 (proxy) + 0 (refunded proxy) + 0.01 (instructions) + 0.005 (doc) + 0.005 (cookbook)
    expect(ledger!.net).toBe(23_000n);

    await app.usage.flush();
    const deadline = Date.now() + 10_000;
    let usage = expectOk<{ totals: Totals; byApi: Array<{ apiId: string } & Totals> }>(await get('/api/v1/usage'));
    while (usage.totals.calls < 5 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      usage = expectOk(await get('/api/v1/usage'));
    }
    expect(usage.totals).toMatchObject({ calls: 5, cost: 0.023 });
    const byApi = Object.fromEntries(usage.byApi.map((row) => [row.apiId, row]));
    expect(byApi[api]).toMatchObject({ calls: 3, cost: 0.013 });
    expect(byApi[PLATFORM_USAGE_API.doc]).toMatchObject({ calls: 1, cost: 0.005 });
    expect(byApi[PLATFORM_USAGE_API.cookbook]).toMatchObject({ calls: 1, cost: 0.005 });
    expect(expectOk<{ totals: Totals }>(await get(`/api/v1/usage/${api}`)).totals).toMatchObject({ calls: 3, cost: 0.013 });
    expect(expectOk<{ totals: Totals }>(await get(`/api/v1/usage/${PLATFORM_USAGE_API.doc}`)).totals).toMatchObject({ calls: 1, cost: 0.005 });
    expect(expectOk<{ stats: { totalCalls: number; totalCost: number } }>(await get('/api/v1/usage/stats')).stats).toMatchObject({
      totalCalls: 5,
      totalCost: 0.023,
    });
  });
});
