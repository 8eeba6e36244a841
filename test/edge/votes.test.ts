import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cookbookExists } from '#db/votes';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/** A fresh operator API to vote on, so tallies start at zero whatever other tests do. */
async function freshApi(): Promise<string> {
  const id = uniqueId('vote-api-');
  await app.deps
    .sql`insert into apis (id, name, provider, base_url, source) values (${id}, 'Vote target', 'votes.example', 'https://votes.example', 'operator')`;
  return id;
}

const vote = (key: string, body: unknown) => app.inject({ method: 'POST', url: '/api/v1/vote', headers: bearer(key), payload: body as object });
const votes = (key: string, query: string) => app.inject({ method: 'GET', url: `/api/v1/votes?${query}`, headers: bearer(key) });

describe('votes', () => {
  it('casts, changes and removes one vote per account and target', async () => {
    const apiId = await freshApi();
    const alice = await createTestAccount(app.deps.sql);
    const bob = await createTestAccount(app.deps.sql);
    const first = expectOk<{ vote: unknown; tally: unknown }>(await vote(alice.fullKey, { targetType: 'api', targetId: apiId, value: 1 }));
    expect(first).toMatchObject({ vote: { targetType: 'api', targetId: apiId, value: 1 }, tally: { up: 1, down: 0, score: 1 } });
    expect(expectOk(await vote(alice.fullKey, { targetType: 'api', targetId: apiId, value: 1 })).tally).toEqual({ up: 1, down: 0, score: 1 });
    expect(expectOk(await vote(bob.fullKey, { targetType: 'api', targetId: apiId, value: -1 })).tally).toEqual({ up: 1, down: 1, score: 0 });
    expect(expectOk(await vote(alice.fullKey, { targetType: 'api', targetId: apiId, value: -1 })).tally).toEqual({ up: 0, down: 2, score: -2 });
    expect(expectOk(await votes(alice.fullKey, `targetType=api&targetId=${apiId}`))).toMatchObject({
      targetType: 'api',
      targetId: apiId,
      up: 0,
      down: 2,
      score: -2,
      myVote: -1,
    });

    const removed = expectOk(
      await app.inject({ method: 'DELETE', url: `/api/v1/vote?targetType=api&targetId=${apiId}`, headers: bearer(alice.fullKey) }),
    );
    expect(removed).toMatchObject({ removed: -1, tally: { up: 0, down: 1, score: -1 } });
    const again = expectOk(
      await app.inject({ method: 'DELETE', url: '/api/v1/vote', headers: bearer(bob.fullKey), payload: { targetType: 'api', targetId: apiId } }),
    );
    expect(again).toMatchObject({ removed: -1, tally: { up: 0, down: 0, score: 0 } });
    expect(expectOk(await votes(alice.fullKey, `targetType=api&targetId=${apiId}`))).toMatchObject({ up: 0, down: 0, myVote: null });
    // The directory shows the score.
    await vote(bob.fullKey, { targetType: 'api', targetId: apiId, value: 1 });
    expect(expectOk<{ api: { votes: number } }>(await app.inject({ method: 'GET', url: `/api/v1/apis/${apiId}` })).api.votes).toBe(1);
  });

  it('keeps tallies exact under many concurrent votes', async () => {
    const apiId = await freshApi();
    const accounts = await Promise.all(Array.from({ length: 24 }, () => createTestAccount(app.deps.sql)));
    // Every account votes several times at once, flipping; the last write per account is its vote.
    const calls = accounts.flatMap((a, i) => [
      vote(a.fullKey, { targetType: 'api', targetId: apiId, value: -1 }),
      vote(a.fullKey, { targetType: 'api', targetId: apiId, value: i % 3 === 0 ? -1 : 1 }),
    ]);
    const answers = await Promise.all(calls);
    for (const res of answers) expectOk(res);
    const rows = await app.deps.sql<{ value: number }[]>`select value from votes where target_type = 'api' and target_id = ${apiId}`;
    expect(rows).toHaveLength(24);
    const up = rows.filter((r) => r.value === 1).length;
    const tally = expectOk<{ up: number; down: number; score: number }>(await votes(accounts[0]!.fullKey, `targetType=api&targetId=${apiId}`));
    expect(tally).toMatchObject({ up, down: 24 - up, score: up - (24 - up) });
  });

  it('rejects invalid values and parameters with 400 and unknown targets with 404', async () => {
    const apiId = await freshApi();
    const a = await createTestAccount(app.deps.sql);
    for (const body of [
      { targetType: 'api', targetId: apiId, value: 0 },
      { targetType: 'api', targetId: apiId, value: 2 },
      { targetType: 'api', targetId: apiId, value: '1' },
      { targetType: 'api', targetId: apiId },
      { targetType: 'user', targetId: apiId, value: 1 },
      { targetType: 'api', targetId: '', value: 1 },
    ]) {
      expectError(await vote(a.fullKey, body), 400, 'validation_failed');
    }
    expectError(await votes(a.fullKey, 'targetType=api'), 400, 'validation_failed');
    expectError(await votes(a.fullKey, `targetType=nope&targetId=${apiId}`), 400, 'validation_failed');
    expectError(await app.inject({ method: 'DELETE', url: '/api/v1/vote', headers: bearer(a.fullKey) }), 400, 'validation_failed');
    expectError(await vote(a.fullKey, { targetType: 'api', targetId: 'no-such-api.example', value: 1 }), 404, 'not_found');
    expectError(await vote(a.fullKey, { targetType: 'cookbook', targetId: 'no-such-cookbook', value: 1 }), 404, 'not_found');
    expectError(await votes(a.fullKey, 'targetType=api&targetId=no-such-api.example'), 404, 'not_found');
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/vote', payload: { targetType: 'api', targetId: apiId, value: 1 } }),
      401,
      'missing_credentials',
    );
  });

  it('resolves cookbooks through to_regclass, so a missing cookbooks table means no cookbook', async () => {
    const [reg] = await app.deps.sql<{ t: string | null }[]>`select to_regclass('cookbooks')::text as t`;
    if (reg?.t) {
      expect(await cookbookExists(app.deps.sql, 'no-such-cookbook')).toBe(false);
    } else {
      expect(await cookbookExists(app.deps.sql, 'anything')).toBe(false);
    }
  });
});
