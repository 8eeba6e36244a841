import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listApis } from '#core/directory';
import { similarity, wordSimilarityOf } from '#core/directory';
import { bearer, createTestAccount, createTestApp, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/** Polls the in-process index (the one the routes use) until `check` holds; answers the last page. */
async function eventually(q: string, check: (ids: { id: string; votes: number }[]) => boolean) {
  const deadline = Date.now() + 10_000;
  let seen: { id: string; votes: number }[] = [];
  while (Date.now() < deadline) {
    const page = await listApis(app.deps.sql, app.directoryIndex, { q, limit: 5 });
    seen = page.apis.map((a) => ({ id: a.id, votes: a.votes_up - a.votes_down }));
    if (check(seen)) return seen;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`index never showed the change for ${q}: ${JSON.stringify(seen)}`);
}

describe('the in-process directory index', () => {
  it('sees an API written after it loaded, a vote on it, and its removal (LISTEN on directory_changed)', async () => {
    // Loaded before the write.
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis?q=weather&limit=1' }));
    const word = uniqueId('frobnic').replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!);
    const id = uniqueId('index-api-');
    await app.deps.sql`insert into apis (id, name, provider, base_url, source, description)
                       values (${id}, ${`The ${word} API`}, 'index.example', 'https://index.example', 'operator', 'Written after the index loaded.')`;
    expect((await eventually(word, (apis) => apis.some((a) => a.id === id)))[0]?.id).toBe(id);

    const account = await createTestAccount(app.deps.sql);
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/vote', headers: bearer(account.fullKey), payload: { targetType: 'api', targetId: id, value: 1 } }));
    await eventually(word, (apis) => apis.find((a) => a.id === id)?.votes === 1);

    await app.deps.sql`delete from votes where target_id = ${id}`;
    await app.deps.sql`delete from apis where id = ${id}`;
    await eventually(word, (apis) => !apis.some((a) => a.id === id));
  });

  it('computes pg_trgm similarity and word_similarity exactly as Postgres does', async () => {
    const pairs = [
      ['twillio', 'twilio api twilio.com api'],
      ['geocoding', 'google maps geocoding api googleapis.com geocoding'],
      ['stripe', 'stripe api stripe.com'],
      ['amazon location service', 'amazon location service amazonaws.com location'],
      ['sendgrid mail', 'sendgrid v3 api sendgrid.com'],
      ['wether', 'weather'],
      ['paymnt', 'payment'],
      ['xkcd', 'xkcd xkcd.com'],
      ['münchen', 'munchen transit'],
    ];
    for (const [a, b] of pairs) {
      const [row] = await app.deps.sql<{ sim: number; word: number }[]>`select similarity(${a!}, ${b!}) as sim, word_similarity(${a!}, ${b!}) as word`;
      expect(similarity(a!, b!), `similarity(${a}, ${b})`).toBeCloseTo(row!.sim, 5);
      expect(wordSimilarityOf(a!, b!), `word_similarity(${a}, ${b})`).toBeCloseTo(row!.word, 5);
    }
  });
});
