import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';

let app: FastifyInstance;
let account: TestAccount;
beforeAll(async () => {
  app = await createTestApp();
  account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
});
afterAll(async () => {
  await app.close();
});

const get = (url: string, key: string | null = account.fullKey) => app.inject({ method: 'GET', url, headers: key ? bearer(key) : {} });

describe('GET /api/v1/docs', () => {
  it('lists at least ten sections with id, slug, title, summary and price', async () => {
    const { docs } = expectOk<{ docs: { id: string; slug: string; title: string; summary: string; price: number }[] }>(await get('/api/v1/docs'));
    expect(docs.length).toBeGreaterThanOrEqual(10);
    const slugs = docs.map((d) => d.slug);
    for (const slug of [
      'getting-started',
      'keys',
      'agent-keys',
      'proxy-and-pricing',
      'balance-and-x402',
      'cookbooks-and-events',
      'human-steps',
      'errors',
      'rate-limits',
      'discovery',
    ]) {
      expect(slugs).toContain(slug);
    }
    for (const doc of docs) expect([0, 0.005]).toContain(doc.price);
    expectError(await get('/api/v1/docs', null), 401, 'missing_credentials');
  });
});

describe('GET /api/v1/docs/search', () => {
  it('answers titles with <mark> highlighted snippets, best first', async () => {
    const { results } = expectOk<{ results: { slug: string; title: string; snippet: string }[] }>(await get('/api/v1/docs/search?q=Retry-After'));
    expect(results[0]?.slug).toBe('rate-limits');
    expect(results[0]?.snippet).toMatch(/<mark>[^<]+<\/mark>/);
    const stemmed = expectOk<{ results: { slug: string }[] }>(await get('/api/v1/docs/search?q=revoking+keys'));
    expect(stemmed.results.map((r) => r.slug)).toContain('keys');
  });

  it('answers an empty list for unknown words and 400 without q', async () => {
    expect(expectOk<{ results: unknown[] }>(await get('/api/v1/docs/search?q=qzxqvjw')).results).toEqual([]);
    expectError(await get('/api/v1/docs/search'), 400, 'validation_failed');
    expectError(await get('/api/v1/docs/search?q=%20'), 400, 'validation_failed');
    expectError(await get('/api/v1/docs/search?q=!!!'), 400, 'validation_failed');
  });
});

describe('GET /api/v1/docs/{slug}', () => {
  it('charges $0.005 for a priced section and nothing for a free one', async () => {
    const priced = await get('/api/v1/docs/keys');
    const { doc } = expectOk<{ doc: { id: string; slug: string; title: string; summary: string; content: string } }>(priced);
    expect(doc).toMatchObject({ slug: 'keys', title: 'API keys' });
    expect(doc.content).toContain('service_sk_');
    expect(priced.headers['x-service-cost']).toBe('0.005');
    const free = await get('/api/v1/docs/balance-and-x402');
    expect(expectOk<{ doc: { content: string } }>(free).doc.content).toContain('x402');
    expect(free.headers['x-service-cost']).toBe('0');
  });

  it('404s an unknown section without charging and answers 402 when funds are short', async () => {
    const poor = await createTestAccount(app.deps.sql, { balanceMicros: 1_000n });
    const missing = await get('/api/v1/docs/no-such-section', poor.fullKey);
    expectError(missing, 404, 'not_found');
    expect(missing.headers['x-service-cost']).toBeUndefined();
    const body = expectError(await get('/api/v1/docs/keys', poor.fullKey), 402, 'insufficient_balance');
    expect(body).toMatchObject({ balance: 0.001, cost: 0.005 });
    expectOk(await get('/api/v1/docs/errors', poor.fullKey));
  });
});
