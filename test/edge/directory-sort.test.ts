import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

interface Summary {
  id: string;
  name: string;
  pricePerCall: number;
  votes: number;
}
interface Page {
  apis: Summary[];
  nextCursor: string | null;
}

let app: FastifyInstance;
/** A category of this file's own operator APIs, so its orders do not depend on what other tests add. */
const category = uniqueId('sorttest').toLowerCase();
/** name, price in micro-dollars, votes up, votes down, accounts calling it, calls per account. */
const fixtures = [
  { name: 'delta', price: 3000, up: 0, down: 1, callers: 1, calls: 500 },
  { name: 'alpha', price: 1000, up: 2, down: 0, callers: 0, calls: 0 },
  { name: 'echo', price: 1000, up: 1, down: 0, callers: 2, calls: 1 },
  { name: 'charlie', price: 2000, up: 0, down: 0, callers: 2, calls: 5 },
  { name: 'bravo', price: 500, up: 3, down: 0, callers: 0, calls: 0 },
  { name: 'foxtrot', price: 2000, up: 0, down: 0, callers: 0, calls: 0 },
  { name: 'golf', price: 2000, up: 1, down: 0, callers: 0, calls: 0 },
];
const idOf = (name: string) => `${category}-${name}`;

beforeAll(async () => {
  app = await createTestApp();
  const { sql } = app.deps;
  const voters = await Promise.all([1, 2, 3].map(() => createTestAccount(sql)));
  const callers = await Promise.all([1, 2].map(() => createTestAccount(sql)));
  for (const f of fixtures) {
    await sql`insert into apis (id, name, provider, base_url, source, categories, price_micros)
              values (${idOf(f.name)}, ${f.name}, 'sort.example', 'https://sort.example', 'operator', ${[category]}, ${f.price})`;
    for (let v = 0; v < f.up + f.down; v++) {
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/vote',
        headers: bearer(voters[v]!.fullKey),
        payload: { targetType: 'api', targetId: idOf(f.name), value: v < f.up ? 1 : -1 },
      });
      expectOk(res);
    }
    // Usage as the usage worker records it: per account, API and day.
    for (let c = 0; c < f.callers; c++) {
      await sql`insert into usage_daily (account_id, api_id, day, calls) values (${callers[c]!.accountId}, ${idOf(f.name)}, current_date, ${f.calls})`;
    }
  }
  // A call older than the popularity window counts for nothing.
  await sql`insert into usage_daily (account_id, api_id, day, calls) values (${callers[0]!.accountId}, ${idOf('golf')}, current_date - 60, 10000)`;
});
afterAll(async () => {
  await app.close();
});

const get = (url: string) => app.inject({ method: 'GET', url });

/** Every page of a listing, following nextCursor to the end; fails on a repeated id. */
async function walk(query: string, limit: number): Promise<{ apis: Summary[]; pages: number }> {
  const apis: Summary[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const url = `/api/v1/apis?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page: Page = expectOk<Page>(await get(url));
    expect(page.apis.length, url).toBeLessThanOrEqual(limit);
    apis.push(...page.apis);
    cursor = page.nextCursor;
    pages++;
    expect(pages, 'too many pages').toBeLessThan(200);
  } while (cursor);
  expect(new Set(apis.map((a) => a.id)).size, 'an API came twice').toBe(apis.length);
  return { apis, pages };
}

const names = (apis: Summary[]) => apis.map((a) => a.name);

describe('GET /api/v1/apis?sort= (browse orders with keyset cursors)', () => {
  it('sorts by name, two per page, with every API once', async () => {
    const { apis, pages } = await walk(`category=${category}&sort=name`, 2);
    expect(pages).toBe(4);
    expect(names(apis)).toEqual(['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf']);
  });

  it('sorts by price, cheapest first, ties by name', async () => {
    const { apis } = await walk(`category=${category}&sort=price`, 3);
    expect(names(apis)).toEqual(['bravo', 'alpha', 'echo', 'charlie', 'foxtrot', 'golf', 'delta']);
    expect(apis.map((a) => a.pricePerCall)).toEqual([0.0005, 0.001, 0.001, 0.002, 0.002, 0.002, 0.003]);
  });

  it('sorts by votes (up minus down), most useful first, ties by name', async () => {
    const { apis } = await walk(`category=${category}&sort=votes`, 2);
    expect(names(apis)).toEqual(['bravo', 'alpha', 'echo', 'golf', 'charlie', 'foxtrot', 'delta']);
    expect(apis.map((a) => a.votes)).toEqual([3, 2, 1, 1, 0, 0, -1]);
  });

  it('sorts by popularity: distinct calling accounts in the last 30 days, then calls, then name', async () => {
    const { apis } = await walk(`category=${category}&sort=popular`, 1);
    // charlie and echo have two callers each (charlie more calls); delta one heavy caller; golf's
    // calls are older than the window.
    expect(names(apis)).toEqual(['charlie', 'echo', 'delta', 'alpha', 'bravo', 'foxtrot', 'golf']);
  });

  it('sorts one category the same way through /apis/category/{category}', async () => {
    const first = expectOk<Page>(await get(`/api/v1/apis/category/${category}?sort=price&limit=4`));
    const second = expectOk<Page>(await get(`/api/v1/apis/category/${category}?sort=price&limit=4&cursor=${first.nextCursor}`));
    expect(names([...first.apis, ...second.apis])).toEqual(['bravo', 'alpha', 'echo', 'charlie', 'foxtrot', 'golf', 'delta']);
    expect(second.nextCursor).toBeNull();
  });

  it('walks the whole catalog in each order without repeats or gaps', { timeout: 120_000 }, async () => {
    const [count] = await app.deps.sql<{ total: number }[]>`select count(*)::int as total from apis`;
    const total = count!.total;
    const byDefault = await walk('', 200);
    expect(byDefault.apis.length).toBeGreaterThanOrEqual(total);
    const byPrice = await walk('sort=price', 200);
    const byVotes = await walk('sort=votes', 200);
    const byName = await walk('sort=name', 200);
    const byPopular = await walk('sort=popular', 200);
    for (const listing of [byPrice, byVotes, byName, byPopular]) expect(listing.apis.length).toBeGreaterThanOrEqual(total);
    byPrice.apis.slice(1).forEach((a, n) => expect(a.pricePerCall, a.id).toBeGreaterThanOrEqual(byPrice.apis[n]!.pricePerCall));
    byVotes.apis.slice(1).forEach((a, n) => expect(a.votes, a.id).toBeLessThanOrEqual(byVotes.apis[n]!.votes));
    // The name order is the database's (its collation), the same on every page.
    const ordered = await app.deps.sql<{ id: string }[]>`select id from apis order by lower(name), id`;
    const listed = new Set(byName.apis.map((a) => a.id));
    const known = new Set(ordered.map((o) => o.id));
    expect(byName.apis.map((a) => a.id).filter((id) => known.has(id))).toEqual(ordered.map((o) => o.id).filter((id) => listed.has(id)));
  });

  it('answers 400 in the error shape for a bad sort, a sort with q, and a cursor of another order', async () => {
    const bad = expectError(await get('/api/v1/apis?sort=cheapest'), 400, 'validation_failed');
    expect(JSON.stringify(bad)).toContain('sort');
    const withQ = expectError(await get('/api/v1/apis?q=weather&sort=name'), 400, 'validation_failed');
    expect(withQ.hint).toEqual(expect.stringContaining('Drop sort'));
    const byName = expectOk<Page>(await get(`/api/v1/apis?category=${category}&sort=name&limit=2`));
    const mixed = expectError(
      await get(`/api/v1/apis?category=${category}&sort=price&limit=2&cursor=${byName.nextCursor}`),
      400,
      'validation_failed',
    );
    expect(mixed.hint).toEqual(expect.stringContaining('sort=name'));
    expectError(
      await get(`/api/v1/apis?sort=name&cursor=${Buffer.from('{"s":"name","k":[1],"i":"x"}').toString('base64url')}`),
      400,
      'validation_failed',
    );
  });
});
