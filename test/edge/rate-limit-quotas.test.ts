import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { bearer, createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

// Local quotas (apps/edge/src/http/rate-limit-quotas.ts): key, account and public budgets are spent
// from blocks of tokens an edge claims from Redis ahead of its hits. The block ceiling is
// min(RATE_LIMIT_LOCAL_BLOCK_MAX, max / 20), so the limits below are large enough for blocks.

const LIMITED = '/api/v1/__test/limited';
const apps: FastifyInstance[] = [];

/** An edge with a cheap key-authenticated route (auth and the limiter, nothing else); `prefix` shares counters between edges. */
async function edge(overrides: Record<string, string>, prefix: string): Promise<FastifyInstance> {
  const app = await createTestApp({ REDIS_PREFIX: prefix, ...overrides });
  app.get(LIMITED, { config: { auth: 'key' } }, async () => ({ ok: true }));
  apps.push(app);
  return app;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

/** `total` calls from `callers` concurrent callers, each sending its next call once its last is answered. */
async function load(app: FastifyInstance, account: TestAccount, total: number, callers: number): Promise<LightMyRequestResponse[]> {
  const responses: LightMyRequestResponse[] = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (sent < total) {
        sent += 1;
        responses.push(await app.inject({ method: 'GET', url: LIMITED, headers: bearer(account.fullKey) }));
        // Between calls the event loop polls for I/O, as it does between requests arriving on sockets;
        // back-to-back injects alone would starve Redis's replies (the claims made ahead) of a turn.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }),
  );
  return responses;
}

function statuses(responses: LightMyRequestResponse[]): { admitted: number; refused: number } {
  const unexpected = responses.find((r) => r.statusCode !== 200 && r.statusCode !== 429);
  expect(unexpected, unexpected && `response was ${unexpected.statusCode}: ${unexpected.body}`).toBeUndefined();
  return { admitted: responses.filter((r) => r.statusCode === 200).length, refused: responses.filter((r) => r.statusCode === 429).length };
}

const counterOf = (prefix: string, account: TestAccount) => `${prefix}:ratelimit:key:key:${account.keyId}`;

describe('local rate-limit quotas', () => {
  it('admits exactly the limit on one edge while most hits are answered from local tokens', async () => {
    const prefix = uniqueId('rlq');
    const app = await edge({ RATE_LIMIT_KEY_MAX: '2000' }, prefix);
    const account = await createTestAccount(app.deps.sql);
    const responses = await load(app, account, 3000, 50);
    expect(statuses(responses)).toEqual({ admitted: 2000, refused: 1000 });
    // Alone, an edge counts down exactly: each admitted call saw its own remaining budget, 1999 down to 0, once.
    const remaining = responses.filter((r) => r.statusCode === 200).map((r) => Number(r.headers['x-ratelimit-remaining']));
    expect(remaining.sort((a, b) => a - b)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
    for (const r of responses) {
      expect(r.headers['x-ratelimit-limit'], JSON.stringify(r.headers)).toBe('2000');
      expect(Number(r.headers['x-ratelimit-reset']), JSON.stringify(r.headers)).toBeGreaterThanOrEqual(1);
    }
    // The block path was taken: more than half of the 6,000 hits (key and account) went on without waiting on Redis.
    const { stats } = app.rateLimiter;
    expect(stats.hits).toBe(6000);
    expect(stats.local, JSON.stringify(stats)).toBeGreaterThan(3000);
  });

  it('never spends tokens of a window that has ended in the next one', async () => {
    const prefix = uniqueId('rlq');
    const app = await edge({ RATE_LIMIT_KEY_MAX: '400', RATE_LIMIT_KEY_WINDOW_SECONDS: '2' }, prefix);
    const account = await createTestAccount(app.deps.sql);
    const counter = counterOf(prefix, account);
    expect(statuses(await load(app, account, 100, 10))).toEqual({ admitted: 100, refused: 0 });
    // The edge holds tokens of this window it has not spent (claimed in Redis beyond the 100 calls).
    await expect.poll(async () => Number(await app.deps.redis.get(counter)), { timeout: 1_000, interval: 10 }).toBeGreaterThan(100);
    await expect.poll(async () => app.deps.redis.pttl(counter), { timeout: 4_000, interval: 20 }).toBe(-2);
    // Another edge spends the whole of the new window's budget first.
    await app.deps.redis.set(counter, '400', 'PX', 10_000);
    const callsBefore = app.rateLimiter.stats.calls;
    const late = await app.inject({ method: 'GET', url: LIMITED, headers: bearer(account.fullKey) });
    expect(late.statusCode, late.body).toBe(429);
    expect(late.headers['x-ratelimit-remaining']).toBe('0');
    expect(app.rateLimiter.stats.calls).toBeGreaterThan(callsBefore);
  });

  it('holds across two edges: never more than the limit, never fewer than the limit less one block ceiling', async () => {
    const prefix = uniqueId('rlq');
    const max = 1000;
    const blockCeiling = max / 20; // below RATE_LIMIT_LOCAL_BLOCK_MAX (100)
    const a = await edge({ RATE_LIMIT_KEY_MAX: String(max) }, prefix);
    const b = await edge({ RATE_LIMIT_KEY_MAX: String(max) }, prefix);
    const account = await createTestAccount(a.deps.sql);
    const [onA, onB] = await Promise.all([load(a, account, 1500, 25), load(b, account, 1500, 25)]);
    const [countedA, countedB] = [statuses(onA), statuses(onB)];
    const admitted = countedA.admitted + countedB.admitted;
    const context = JSON.stringify({ countedA, countedB, a: a.rateLimiter.stats, b: b.rateLimiter.stats });
    expect(admitted, context).toBeLessThanOrEqual(max);
    expect(admitted, context).toBeGreaterThanOrEqual(max - (2 - 1) * blockCeiling);
    // An edge refuses only once it holds no token and the window's budget is all claimed, so when
    // both have refused, every token either claimed has been spent: exactly the limit.
    if (countedA.refused > 0 && countedB.refused > 0) expect(admitted, context).toBe(max);
    expect(a.rateLimiter.stats.local, context).toBeGreaterThan(0);
    expect(b.rateLimiter.stats.local, context).toBeGreaterThan(0);
  });

  it("loses at most one block ceiling to an edge's unspent tokens, and only until that edge spends them", async () => {
    const prefix = uniqueId('rlq');
    const max = 1000;
    const blockCeiling = max / 20;
    const a = await edge({ RATE_LIMIT_KEY_MAX: String(max) }, prefix);
    const b = await edge({ RATE_LIMIT_KEY_MAX: String(max) }, prefix);
    const account = await createTestAccount(a.deps.sql);
    expect(statuses(await load(a, account, 200, 20))).toEqual({ admitted: 200, refused: 0 });
    // a now holds tokens claimed ahead. b gets the rest of the budget and refuses the remainder ...
    const onB = statuses(await load(b, account, 1500, 25));
    expect(onB.admitted).toBeGreaterThanOrEqual(max - 200 - blockCeiling);
    expect(onB.admitted).toBeLessThan(max - 200);
    // ... the calls a holds are lost to b until a spends them, and then the window has admitted exactly its limit.
    const onA = statuses(await load(a, account, 100, 5));
    expect(onA.admitted + onB.admitted).toBe(max - 200);
  });

  it('makes far fewer Redis calls than requests under steady load', async () => {
    const app = await edge({ RATE_LIMIT_KEY_MAX: '1000000', RATE_LIMIT_ACCOUNT_MAX: '1000000' }, uniqueId('rlq'));
    const account = await createTestAccount(app.deps.sql);
    const requests = 3000;
    expect(statuses(await load(app, account, requests, 20))).toEqual({ admitted: requests, refused: 0 });
    const { stats } = app.rateLimiter;
    expect(stats.hits).toBe(2 * requests);
    // One call per block of up to 100 tokens (claimed half a block ahead), for the key and the account.
    expect(stats.calls, JSON.stringify(stats)).toBeLessThan(requests / 10);
    // Most hits are answered from tokens already held. How many depends on the machine's pace: a hit that
    // finds its block spent before the top-up claimed half a block ahead came back waits for it (98 % were
    // local on a quiet machine, 88.6 % once in a full run on two busy cores).
    expect(stats.local, JSON.stringify(stats)).toBeGreaterThan(0.75 * stats.hits);
  });

  it('counts every hit in Redis before it goes on when RATE_LIMIT_LOCAL_BLOCK_MAX is 1', async () => {
    const prefix = uniqueId('rlq');
    const app = await edge({ RATE_LIMIT_KEY_MAX: '1000000', RATE_LIMIT_LOCAL_BLOCK_MAX: '1' }, prefix);
    const account = await createTestAccount(app.deps.sql);
    expect(statuses(await load(app, account, 300, 10))).toEqual({ admitted: 300, refused: 0 });
    expect(app.rateLimiter.stats.local).toBe(0);
    expect(await app.deps.redis.get(counterOf(prefix, account))).toBe('300');
  });

  it('keeps registration exact: one Redis count per request, never a local token', async () => {
    const prefix = uniqueId('rlq');
    // With a limit this large a local quota would claim blocks of 50.
    const app = await edge({ RATE_LIMIT_REGISTER_MAX: '1000' }, prefix);
    const register = () =>
      app.inject({ method: 'POST', url: '/api/v1/register', payload: { email: 'not-an-email', password: 'x' }, remoteAddress: '192.0.2.77' });
    for (let round = 0; round < 4; round++) {
      const responses = await Promise.all(Array.from({ length: 10 }, register));
      for (const r of responses) expect(r.statusCode, r.body).toBe(400);
    }
    expect(app.rateLimiter.stats.local).toBe(0);
    expect(await app.deps.redis.get(`${prefix}:ratelimit:register:ip:192.0.2.77`)).toBe('40');
  });
});
