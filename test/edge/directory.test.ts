import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directoryRoot, sourceCategories, specFiles } from '#core/directory';
import { listCategories } from '#core/directory';
import { PRICES } from '#contracts/money';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';

interface Summary {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  category: string;
  categories: string[];
  description: string;
  pricePerCall: number;
  votes: number;
}
interface Page {
  apis: Summary[];
  nextCursor: string | null;
  hint?: string;
}

let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

const get = (url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers });

describe('GET /api/v1/apis (browse and search)', () => {
  it('pages through the catalog with opaque cursors: default 50, no repeats', async () => {
    const first = expectOk<Page>(await get('/api/v1/apis'));
    expect(first.apis).toHaveLength(50);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = expectOk<Page>(await get(`/api/v1/apis?cursor=${first.nextCursor}`));
    expect(second.apis).toHaveLength(50);
    const ids = new Set([...first.apis, ...second.apis].map((a) => a.id));
    expect(ids.size).toBe(100);
    const summary = first.apis[0]!;
    expect(summary).toMatchObject({
      id: expect.any(String),
      name: expect.any(String),
      provider: expect.any(String),
      category: expect.any(String),
      pricePerCall: expect.any(Number),
      votes: expect.any(Number),
    });
  });

  it('caps limit at 200 and rejects bad paging input with 400', async () => {
    expect(expectOk<Page>(await get('/api/v1/apis?limit=200')).apis).toHaveLength(200);
    expectError(await get('/api/v1/apis?limit=201'), 400, 'validation_failed');
    expectError(await get('/api/v1/apis?limit=0'), 400, 'validation_failed');
    expectError(await get('/api/v1/apis?cursor=not-a-cursor'), 400, 'validation_failed');
  });

  it('walks a whole category to the end, where nextCursor is null', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Page = expectOk<Page>(await get(`/api/v1/apis?category=search&limit=3${cursor ? `&cursor=${cursor}` : ''}`));
      for (const api of page.apis) expect(api.categories).toContain('search');
      seen.push(...page.apis.map((a) => a.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    const categories = expectOk<{ categories: { id: string; apiCount: number }[] }>(await get('/api/v1/categories')).categories;
    expect(seen.length).toBe(categories.find((c) => c.id === 'search')?.apiCount);
  });

  it('ranks by relevance, tolerating typos and word forms', async () => {
    const exact = expectOk<Page>(await get('/api/v1/apis?q=twilio'));
    expect(exact.apis[0]?.provider).toBe('twilio.com');
    const typo = expectOk<Page>(await get('/api/v1/apis?q=twillio'));
    expect(typo.apis.slice(0, 5).map((a) => a.provider)).toContain('twilio.com');
    const forms = expectOk<Page>(await get('/api/v1/apis?q=geocoded+addresses'));
    expect(forms.apis.slice(0, 10).some((a) => /geocod/i.test(`${a.name} ${a.description}`))).toBe(true);
    const filtered = expectOk<Page>(await get('/api/v1/apis?q=sms&category=telecom'));
    expect(filtered.apis.length).toBeGreaterThan(0);
    for (const api of filtered.apis) expect(api.categories).toContain('telecom');
  });

  it('pages search results without repeats', async () => {
    const first = expectOk<Page>(await get('/api/v1/apis?q=email&limit=5'));
    expect(first.apis).toHaveLength(5);
    const second = expectOk<Page>(await get(`/api/v1/apis?q=email&limit=5&cursor=${first.nextCursor}`));
    expect(second.apis.length).toBeGreaterThan(0);
    const ids = [...first.apis, ...second.apis].map((a) => a.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('answers an empty list with a hint for words nothing matches, and 400 for empty or punctuation-only q', async () => {
    const none = expectOk<Page>(await get('/api/v1/apis?q=qzxqvjw'));
    expect(none.apis).toEqual([]);
    expect(none.hint).toMatch(/discover/);
    expectError(await get('/api/v1/apis?q='), 400, 'validation_failed');
    expectError(await get('/api/v1/apis?q=%3F%21...'), 400, 'validation_failed');
    expectError(await get(`/api/v1/apis?q=${'a'.repeat(501)}`), 400, 'validation_failed');
  });
});

describe('GET /api/v1/apis/{id}, /categories, /apis/category/{c}', () => {
  it('answers details with base URL (a catalog API: public), auth scheme, endpoints and proxy path', async () => {
    const { api } = expectOk<{ api: Record<string, unknown> }>(await get('/api/v1/apis/twilio.com-api'));
    expect(api).toMatchObject({
      id: 'twilio.com-api',
      provider: 'twilio.com',
      service: 'api',
      baseUrl: 'https://api.twilio.com',
      authScheme: { type: 'basic' },
      proxyPath: '/api/v1/proxy/twilio.com-api/',
      pricePerCall: 0.005,
      featured: true,
    });
    expect((api.endpoints as unknown[]).length).toBeGreaterThan(50);
    expect((api.endpoints as { method: string; path: string }[])[0]).toMatchObject({
      method: expect.any(String),
      path: expect.stringMatching(/^\//),
    });
  });

  it("answers an OAuth API's flows, scopes, provider, operations' scopes and where to get credentials", async () => {
    const { api } = expectOk<{ api: Record<string, unknown> }>(await get('/api/v1/apis/googleapis.com-sheets'));
    expect(api).toMatchObject({
      authScheme: { type: 'oauth2' },
      oauthProvider: 'accounts.google.com',
      keyDocsUrl: 'https://console.developers.google.com/',
      oauth: {
        flows: {
          authorizationCode: {
            authorizationUrl: 'https://accounts.google.com/o/oauth2/auth',
            tokenUrl: 'https://accounts.google.com/o/oauth2/token',
          },
          implicit: { authorizationUrl: 'https://accounts.google.com/o/oauth2/auth' },
        },
        scopes: { 'https://www.googleapis.com/auth/spreadsheets': 'See, edit, create, and delete all your Google Sheets spreadsheets' },
      },
    });
    const endpoints = api.endpoints as { method: string; path: string; scopes?: string[] }[];
    expect(endpoints.find((e) => e.method === 'POST' && e.path === '/v4/spreadsheets')?.scopes).toContain(
      'https://www.googleapis.com/auth/spreadsheets',
    );
    const { api: plain } = expectOk<{ api: Record<string, unknown> }>(await get('/api/v1/apis/xkcd.com'));
    expect(plain).toMatchObject({ oauth: null, oauthProvider: null, keyDocsUrl: null });
  });

  it('404s an unknown API id', async () => {
    expectError(await get('/api/v1/apis/no-such-api.example'), 404, 'not_found');
  });

  it('counts APIs per category exactly as the source data does', { timeout: 120_000 }, async () => {
    const expected = new Map<string, number>();
    let uncategorized = 0;
    for await (const file of specFiles(directoryRoot())) {
      const spec = JSON.parse(await readFile(file, 'utf8')) as { info?: Record<string, unknown> };
      const categories = sourceCategories(spec.info ?? {});
      if (categories.length === 0) uncategorized += 1;
      for (const c of categories) expected.set(c, (expected.get(c) ?? 0) + 1);
    }
    expected.set('uncategorized', uncategorized);
    // Imported rows match the source exactly, category by category (the importer test's private
    // rows carry test_* categories of their own).
    const imported = new Map(
      (await listCategories(app.deps.sql, 'apis.guru')).filter((c) => !c.id.startsWith('test_')).map((c) => [c.id, c.api_count]),
    );
    expect(Object.fromEntries(imported)).toEqual(Object.fromEntries(expected));
    // The endpoint counts every row; other test files may add operator rows to the shared catalog.
    const { categories } = expectOk<{ categories: { id: string; name: string; apiCount: number }[] }>(await get('/api/v1/categories'));
    const actual = new Map(categories.map((c) => [c.id, c.apiCount]));
    for (const [id, count] of expected) expect(actual.get(id), `category ${id}`).toBeGreaterThanOrEqual(count);
    expect(categories.find((c) => c.id === 'machine_learning')?.name).toBe('Machine learning');
  });

  it('lists one category and 404s a category no API has', async () => {
    const page = expectOk<Page>(await get('/api/v1/apis/category/messaging?limit=10'));
    expect(page.apis).toHaveLength(10);
    for (const api of page.apis) expect(api.categories).toContain('messaging');
    expectError(await get('/api/v1/apis/category/no-such-category'), 404, 'not_found');
  });
});

describe('GET /api/v1/apis/{id}/instructions ($0.01)', () => {
  it('charges $0.01 and answers markdown with proxy paths, auth, endpoints, example, price and errors', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const res = await get('/api/v1/apis/twilio.com-api/instructions', bearer(account.fullKey));
    const body = expectOk<{ apiId: string; format: string; instructions: string }>(res);
    expect(res.headers['x-service-cost']).toBe('0.01');
    expect(res.headers['x-service-balance']).toBe('0.99');
    expect(body).toMatchObject({ apiId: 'twilio.com-api', format: 'markdown' });
    for (const part of [
      '/api/v1/proxy/twilio.com-api/',
      'POST /api/v1/connect/twilio.com-api',
      '## Main endpoints',
      'curl -X',
      '$0.005',
      '402',
      '404',
      '502',
      '503',
    ]) {
      expect(body.instructions, part).toContain(part);
    }
    expect(body.instructions).toContain(`${app.deps.settings.PUBLIC_URL}/api/v1/proxy/twilio.com-api/`);
    expect(body.instructions).not.toContain('$BASE_URL');
    const [row] = await app.deps.sql<{ amount_micros: bigint; item: string; api_id: string }[]>`
      select amount_micros, item, api_id from ledger_entries where account_id = ${account.accountId} and kind = 'charge'`;
    expect(row).toMatchObject({ amount_micros: -PRICES.instructions, item: 'instructions', api_id: 'twilio.com-api' });
  });

  it('answers 402 with balance and cost when funds are short, and charges nothing', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 5_000n });
    const body = expectError(await get('/api/v1/apis/twilio.com-api/instructions', bearer(account.fullKey)), 402, 'insufficient_balance');
    expect(body).toMatchObject({ balance: 0.005, cost: 0.01 });
    const [after] = await app.deps.sql<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${account.accountId}`;
    expect(after?.balance_micros).toBe(5_000n);
  });

  it('404s an unknown API without charging, and needs a key', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const res = await get('/api/v1/apis/no-such-api.example/instructions', bearer(account.fullKey));
    expectError(res, 404, 'not_found');
    expect(res.headers['x-service-cost']).toBeUndefined();
    const charges = await app.deps.sql`select 1 from ledger_entries where account_id = ${account.accountId} and kind = 'charge'`;
    expect(charges).toHaveLength(0);
    expectError(await get('/api/v1/apis/twilio.com-api/instructions'), 401, 'missing_credentials');
  });
});
