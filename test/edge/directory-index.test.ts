import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listApis } from '#core/directory';
import { similarity, wordSimilarityOf } from '#core/directory';
import { fileURLToPath } from 'node:url';
import { loadDevset } from '#core/directory';
import { bearer, createTestAccount, createTestApp, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { RANKING_EDGE_CASE_URLS } from '../helpers/directory-urls.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/** Polls the in-process index (the one the routes use) until `check` holds; answers the last page. */
function indexShows(q: string, check: (ids: { id: string; votes: number }[]) => boolean) {
  let seen: { id: string; votes: number }[] = [];
  return eventually(
    `the index to show the change for ${q}`,
    async () => {
      const page = await listApis(app.deps.sql, app.directoryIndex, { q, limit: 5 });
      seen = page.apis.map((a) => ({ id: a.id, votes: a.votes_up - a.votes_down }));
      return check(seen) ? seen : undefined;
    },
    { timeoutMs: 30_000, context: () => `it answered ${JSON.stringify(seen)}` },
  );
}

describe('the in-process directory index', () => {
  // The first request loads the index (the catalog, WordNet, the model): on a loaded two-core host that alone took 30 s.
  it('sees an API written after it loaded, a vote on it, and its removal (LISTEN on directory_changed)', { timeout: 90_000 }, async () => {
    // Loaded before the write.
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis?q=weather&limit=1' }));
    const word = uniqueId('frobnic').replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!);
    const id = uniqueId('index-api-');
    await app.deps.sql`insert into apis (id, name, provider, base_url, source, description)
                       values (${id}, ${`The ${word} API`}, 'index.example', 'https://index.example', 'operator', 'Written after the index loaded.')`;
    expect((await indexShows(word, (apis) => apis.some((a) => a.id === id)))[0]?.id).toBe(id);

    const account = await createTestAccount(app.deps.sql);
    expectOk(
      await app.inject({
        method: 'POST',
        url: '/api/v1/vote',
        headers: bearer(account.fullKey),
        payload: { targetType: 'api', targetId: id, value: 1 },
      }),
    );
    await indexShows(word, (apis) => apis.find((a) => a.id === id)?.votes === 1);

    await app.deps.sql`delete from votes where target_id = ${id}`;
    await app.deps.sql`delete from apis where id = ${id}`;
    await indexShows(word, (apis) => !apis.some((a) => a.id === id));
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
      const [row] = await app.deps.sql<
        { sim: number; word: number }[]
      >`select similarity(${a!}, ${b!}) as sim, word_similarity(${a!}, ${b!}) as word`;
      expect(similarity(a!, b!), `similarity(${a}, ${b})`).toBeCloseTo(row!.sim, 5);
      expect(wordSimilarityOf(a!, b!), `word_similarity(${a}, ${b})`).toBeCloseTo(row!.word, 5);
    }
  });
});

describe('ranking in worker threads (DIRECTORY_RANK_WORKERS)', () => {
  // Without the shared Redis answer cache: both apps rank every request themselves.
  let inline: FastifyInstance;
  let pooled: FastifyInstance;
  beforeAll(async () => {
    inline = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0', DIRECTORY_RANK_WORKERS: '0' });
    pooled = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0', DIRECTORY_RANK_WORKERS: '2' });
  });
  afterAll(async () => {
    await Promise.all([inline?.close(), pooled?.close()]);
  });

  it('answers search and discovery byte for byte as the event loop does, errors included', { timeout: 60_000 }, async () => {
    const tasks = await loadDevset(fileURLToPath(new URL('../../docs/discovery-devset.json', import.meta.url)));
    const cursor = Buffer.from(JSON.stringify({ o: 5 })).toString('base64url');
    const urls = [
      ...['stripe', 'twillio', 'geocoding', 'amazon web services', 'weather forecast', 'qzxqvjw', 'münchen transit'].flatMap((q) => [
        `/api/v1/apis?q=${encodeURIComponent(q)}`,
        `/api/v1/apis?q=${encodeURIComponent(q)}&limit=5&cursor=${cursor}`,
        `/api/v1/apis?q=${encodeURIComponent(q)}&category=financial&limit=3`,
      ]),
      ...tasks
        .slice(0, 20)
        .flatMap((t) => [`/api/v1/discover?q=${encodeURIComponent(t.q)}`, `/api/v1/discover?query=${encodeURIComponent(t.q)}&limit=50`]),
      ...RANKING_EDGE_CASE_URLS,
    ];
    for (const url of urls) {
      const [a, b] = await Promise.all([inline.inject({ method: 'GET', url }), pooled.inject({ method: 'GET', url })]);
      expect({ status: b.statusCode, type: b.headers['content-type'] }, url).toEqual({ status: a.statusCode, type: a.headers['content-type'] });
      const strip = (body: string) => body.replace(/"requestId":"[^"]*"/, '');
      expect(strip(b.body), url).toBe(strip(a.body));
    }
  });

  it('answers many concurrent requests, each with its own answer', async () => {
    const queries = [
      'send a text message',
      'translate text to french',
      'weather forecast for a city',
      'convert currency',
      'shorten a url',
      'stock prices',
    ];
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        pooled.inject({ method: 'GET', url: `/api/v1/discover?q=${encodeURIComponent(queries[i % queries.length]!)}&limit=3` }),
      ),
    );
    answers.forEach((res, i) => expect(expectOk<{ query: string }>(res).query).toBe(queries[i % queries.length]));
  });

  // Each change reloads the index in both threads; on a loaded two-core host the test took over 30 s.
  it('follows catalog changes in every worker (LISTEN on directory_changed)', { timeout: 120_000 }, async () => {
    const word = uniqueId('quuxwid').replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!);
    const id = uniqueId('worker-api-');
    const ids = async () => {
      // As many requests as workers at once, so that every worker answers one.
      const pages = await Promise.all([0, 1].map(() => pooled.inject({ method: 'GET', url: `/api/v1/apis?q=${word}&limit=5` })));
      return pages.map((res) => expectOk<{ apis: { id: string }[] }>(res).apis.map((a) => a.id));
    };
    let seen: string[][] = [];
    const until = (check: (seen: string[][]) => boolean) =>
      eventually(
        'the workers to show the change',
        async () => {
          seen = await ids();
          return check(seen) ? true : undefined;
        },
        { timeoutMs: 30_000, context: () => `they answered ${JSON.stringify(seen)}` },
      );
    await until((seen) => seen.every((page) => page.length === 0));
    await pooled.deps.sql`insert into apis (id, name, provider, base_url, source, description)
                          values (${id}, ${`The ${word} API`}, 'worker.example', 'https://worker.example', 'operator', 'Written after the workers loaded.')`;
    // Five rounds in a row, all seeing it: both workers have reloaded.
    for (let round = 0; round < 5; round++) await until((seen) => seen.every((page) => page[0] === id));
    await pooled.deps.sql`delete from apis where id = ${id}`;
    await until((seen) => seen.every((page) => page.length === 0));
  });
});
