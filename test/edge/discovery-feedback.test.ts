import type { AddressInfo } from 'node:net';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discover, DiscoveryListings, FEEDBACK_SATURATION, feedbackSignal, listedApiIds } from '#core/directory';
import { createRedis } from '#core/platform';
import { discoveryFeedback, pruneDiscoveryListings } from '#db/discovery-feedback';
import { usageProcessor } from '#workers/queues/usage';
import { bearer, createTestAccount, createTestApp, expectOk, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// Discovery's feedback signal (docs/decisions/discovery-feedback.md): real discoveries through the
// route, real proxied calls recorded by the real usage worker, the signal read from Postgres.

interface DiscoverBody {
  results: { api: { id: string }; score: number }[];
}

describe('discovery feedback', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let worker: Worker;
  let word: string;
  let first: string;
  let second: string;

  const order = async (feedback: boolean) => (await discover(app.directoryIndex, word, 10, undefined, { feedback })).results.map((r) => r.api.id);
  const callsWritten = (account: TestAccount, api: string) =>
    eventually(
      `the usage of ${api} to be written`,
      async () => {
        await app.usage.flush();
        const [row] = await app.deps.sql<{ calls: string }[]>`
          select calls::text from usage_daily where account_id = ${account.accountId} and api_id = ${api}`;
        return row ? row : undefined;
      },
      { timeoutMs: 15_000 },
    );

  beforeAll(async () => {
    const prefix = uniqueId('feedback');
    upstream = await startUpstream((req, res) => {
      const failing = (req.url ?? '').startsWith('/boom');
      res.writeHead(failing ? 500 : 200, { 'content-type': 'application/json' });
      res.end(failing ? '{"error":"down"}' : '{"found":true}');
    });
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: prefix,
      USAGE_FLUSH_MS: '20',
      DIRECTORY_CACHE_SECONDS: '0',
      // On here (off in the other test apps): the edge keeps what discovery lists; the test reads the signal itself.
      DISCOVERY_FEEDBACK_REFRESH_SECONDS: '600',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix, concurrency: 2 });
    // Two APIs alike in every word (name, description): the ranking ties them and orders them by id.
    word = uniqueId('quorble').replace(/[0-9_-]/g, (d) => 'abcdefghijkl'[Number(d)] ?? 'x');
    const stem = uniqueId('fb');
    const same = { baseUrl: upstream.url, price: '0.001', name: `The ${word} registry`, description: `Looks up ${word} records by their number.` };
    first = await registerApi({ ...same, id: `${stem}-a` });
    second = await registerApi({ ...same, id: `${stem}-b` });
    await eventually('the index to hold both APIs', async () => ((await order(false)).includes(second) ? true : undefined), { timeoutMs: 10_000 });
  });
  afterAll(async () => {
    await worker?.close();
    workerRedis?.disconnect();
    await app?.close();
    await upstream?.close();
  });

  it('ranks higher the API accounts called after discovery listed it, and counts only successful calls', async () => {
    expect((await order(false)).slice(0, 2)).toEqual([first, second]);

    // An account discovers through the route, then calls the second of the two.
    const caller = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const answer = await app.inject({ method: 'GET', url: `/api/v1/discover?q=${word}`, headers: bearer(caller.fullKey) });
    const listed = expectOk<DiscoverBody>(answer).results.map((r) => r.api.id);
    expect(listed.slice(0, 2)).toEqual([first, second]);
    // The ids the edge notes are read off the answer's bytes: the same ids, in the same order.
    expect(listedApiIds(answer.rawPayload)).toEqual(listed);
    await app.discoveryListings!.flush();
    const noted = await app.deps.sql<{ api_ids: string[] }[]>`select api_ids from discovery_listings where account_id = ${caller.accountId}`;
    expect(noted.map((r) => r.api_ids)).toEqual([listed]);

    const served = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${second}/records/1`, headers: bearer(caller.fullKey) });
    expect(served.status).toBe(200);
    await callsWritten(caller, second);

    // Another account discovers too, and its only call to the first fails upstream (refunded): no use.
    const unlucky = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    expectOk(await app.inject({ method: 'GET', url: `/api/v1/discover?q=${word}`, headers: bearer(unlucky.fullKey) }));
    await app.discoveryListings!.flush();
    const failed = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${first}/boom`, headers: bearer(unlucky.fullKey) });
    expect(failed.status).toBe(502);
    await callsWritten(unlucky, first);

    const feedback = await discoveryFeedback(app.deps.sql, 30);
    // The caller used it and came to it through discovery: two counts for one account.
    expect(feedback.get(second)).toEqual({ used: 1, followed: 1 });
    expect(feedback.has(first)).toBe(false);

    await app.directoryIndex.refreshFeedback();
    expect((await order(true)).slice(0, 2)).toEqual([second, first]);
    // The evaluation ranks without it: the catalog's order is unchanged there.
    expect((await order(false)).slice(0, 2)).toEqual([first, second]);
    const reasonOf = async () => (await discover(app.directoryIndex, word, 10)).results.find((r) => r.api.id === second)!.reason;
    // One account's use is not told in the reason; from three accounts on, the reason says how many.
    expect(await reasonOf()).not.toMatch(/used by/);
    for (const n of [1, 2]) {
      const another = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
      const res = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${second}/records/${n}`, headers: bearer(another.fullKey) });
      expect(res.status).toBe(200);
      await callsWritten(another, second);
    }
    await app.directoryIndex.refreshFeedback();
    expect((await discoveryFeedback(app.deps.sql, 30)).get(second)).toEqual({ used: 3, followed: 1 });
    expect(await reasonOf()).toContain('used by 3 accounts in the last 30 days');
  });

  it('notes the same listing to the same account once per batch, and nothing for a closed account', async () => {
    // A recorder of its own, whose timer never fires during the test: the batch is the test's to write.
    const listings = new DiscoveryListings(app.deps.sql, { flushMs: 3_600_000 });
    try {
      const account = await createTestAccount(app.deps.sql);
      const closed = await createTestAccount(app.deps.sql);
      await app.deps.sql`update accounts set deleted_at = now() where id = ${closed.accountId}`;
      listings.note(account.accountId, [second, first]);
      listings.note(account.accountId, [second, first]);
      listings.note(account.accountId, [first]);
      listings.note(closed.accountId, [first]);
      await listings.flush();
      const rows = await app.deps.sql<{ account_id: string; api_ids: string[] }[]>`
        select account_id, api_ids from discovery_listings where account_id in (${account.accountId}, ${closed.accountId}) order by array_length(api_ids, 1) desc`;
      expect(rows.map((r) => [r.account_id, r.api_ids])).toEqual([
        [account.accountId, [second, first]],
        [account.accountId, [first]],
      ]);
    } finally {
      await listings.close();
    }
  });

  it('grows with the logarithm of the accounts and saturates', () => {
    expect(feedbackSignal(0, 0)).toBe(0);
    expect(feedbackSignal(1, 0)).toBeGreaterThan(0);
    expect(feedbackSignal(1, 1)).toBeGreaterThan(feedbackSignal(2, 0) - 1e-9);
    expect(feedbackSignal(10, 0)).toBeLessThan(feedbackSignal(100, 0));
    expect(feedbackSignal(FEEDBACK_SATURATION, 0)).toBeCloseTo(1, 6);
    expect(feedbackSignal(FEEDBACK_SATURATION * 50, FEEDBACK_SATURATION)).toBe(1);
  });

  it('keeps listings for the feedback window only', async () => {
    const account = await createTestAccount(app.deps.sql);
    const old = new Date(Date.now() - 40 * 86_400_000);
    await app.deps.sql`insert into discovery_listings (account_id, at, api_ids) values
                         (${account.accountId}, ${old}, ${[first]}), (${account.accountId}, now(), ${[second]})`;
    await pruneDiscoveryListings(app.deps.sql, new Date(Date.now() - 31 * 86_400_000), 5_000);
    const left = await app.deps.sql<{ api_ids: string[] }[]>`select api_ids from discovery_listings where account_id = ${account.accountId}`;
    expect(left.map((r) => r.api_ids)).toEqual([[second]]);
  });
});
