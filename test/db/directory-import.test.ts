import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiIdFor, directoryRoot, importDirectory, normalizeSpec, reindexApi } from '#core/directory';
import { plainText } from '#core/directory';
import { openSecret, platformKeyContext } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';

let sql: Sql;
let root: string;
const tag = uniqueId('imp');
const providers = [`a-${tag}.example`, `b-${tag}.example`, `op-${tag}.example`];

beforeAll(async () => {
  sql = createSql(testDatabaseUrl(), { max: 4 });
  // A private directory of three real descriptions under providers nobody else uses.
  root = await mkdtemp(join(tmpdir(), 'directory-'));
  const sources = ['xkcd.com.json', 'nytimes.com/article_search.json', 'stripe.com.json'];
  for (const [i, source] of sources.entries()) {
    const spec = JSON.parse(await readFile(join(directoryRoot(), source), 'utf8')) as { info: Record<string, unknown> };
    spec.info['x-providerName'] = providers[i];
    // A category of its own, so the category counts other test files check never see these rows.
    spec.info['x-apisguru-categories'] = [`test_${tag}`];
    await mkdir(join(root, providers[i]!), { recursive: true });
    await writeFile(join(root, providers[i]!, 'spec.json'), JSON.stringify(spec));
  }
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await sql`delete from apis where provider = any(${providers})`;
  await sql.end();
});

describe('directory importer', () => {
  it('imports idempotently, never touches operator rows and keeps operator-set prices', async () => {
    const operatorId = apiIdFor(providers[2]!, null);
    await sql`insert into apis (id, name, provider, base_url, source, price_micros, description)
              values (${operatorId}, 'Operator API', ${providers[2]!}, 'https://operator.example', 'operator', 7777, 'kept')`;
    const lines: string[] = [];
    const progress: unknown[] = [];
    const first = await importDirectory(sql, {
      root,
      defaultPriceMicros: 1000n,
      progressEvery: 1,
      log: (l) => lines.push(l),
      onProgress: (p) => void progress.push(p),
    });
    expect(first).toMatchObject({ processed: 3, total: 3, inserted: 2, updated: 0, operatorOwned: 1, failed: 0 });
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(lines.some((l) => l.includes('1/3 processed'))).toBe(true);

    const count = async () => (await sql<{ n: number }[]>`select count(*)::int as n from apis where provider = any(${providers})`)[0]?.n;
    expect(await count()).toBe(3);
    // The operator (CLI) changes the price and features an imported API: a re-import keeps both.
    const importedId = apiIdFor(providers[0]!, null);
    await sql`update apis set price_micros = 4242, featured = true where id = ${importedId}`;

    const second = await importDirectory(sql, { root, defaultPriceMicros: 1000n });
    expect(second).toMatchObject({ processed: 3, inserted: 0, updated: 0, unchanged: 2, operatorOwned: 1, failed: 0 });
    const forced = await importDirectory(sql, { root, defaultPriceMicros: 1000n, force: true });
    expect(forced).toMatchObject({ inserted: 0, updated: 2, operatorOwned: 1 });
    expect(await count()).toBe(3);

    const [imported] = await sql<
      { price_micros: bigint; featured: boolean; name: string; source: string }[]
    >`select price_micros, featured, name, source from apis where id = ${importedId}`;
    expect(imported).toMatchObject({ price_micros: 4242n, featured: true, name: 'XKCD', source: 'apis.guru' });
    const [operator] = await sql<
      { price_micros: bigint; description: string; source: string }[]
    >`select price_micros, description, source from apis where id = ${operatorId}`;
    expect(operator).toMatchObject({ price_micros: 7777n, description: 'kept', source: 'operator' });

    // Re-indexing one API is a job of its own.
    expect(await reindexApi(sql, importedId, { root, defaultPriceMicros: 1000n })).toBe(true);
    expect(await reindexApi(sql, operatorId, { root, defaultPriceMicros: 1000n })).toBe(false);
  });

  it('applies the curation file (price, featured) only to imported rows', async () => {
    const id = apiIdFor(providers[1]!, 'article_search');
    await importDirectory(sql, { root, defaultPriceMicros: 1000n, curation: { apis: { [id]: { price: '0.25', featured: true } } } });
    const [row] = await sql<{ price_micros: bigint; featured: boolean }[]>`select price_micros, featured from apis where id = ${id}`;
    expect(row).toMatchObject({ price_micros: 250_000n, featured: true });
  });

  it('seals a curated platform key exactly as the proxy opens it', async () => {
    const id = apiIdFor(providers[0]!, null);
    const masterKey = Buffer.alloc(32, 7);
    const envName = `PLATFORM_KEY_${tag.toUpperCase()}`;
    await importDirectory(sql, {
      root,
      defaultPriceMicros: 1000n,
      connectionsMasterKey: masterKey,
      env: { [envName]: 'upstream-secret-123' },
      curation: { apis: { [id]: { platformKeyEnv: envName } } },
    });
    const [row] = await sql<{ platform_key_encrypted: Buffer | null }[]>`select platform_key_encrypted from apis where id = ${id}`;
    expect(row?.platform_key_encrypted).toBeInstanceOf(Buffer);
    expect(row!.platform_key_encrypted!.toString('utf8')).not.toContain('upstream-secret-123');
    expect(openSecret(masterKey, row!.platform_key_encrypted!, platformKeyContext(id))).toBe('upstream-secret-123');
  });

  it('normalizes a description: id, categories, plain text, base URL, auth and endpoints', async () => {
    const spec = JSON.parse(await readFile(join(directoryRoot(), 'twilio.com/api.json'), 'utf8')) as Record<string, unknown>;
    const record = normalizeSpec(spec);
    expect(record).toMatchObject({
      id: 'twilio.com-api',
      provider: 'twilio.com',
      service: 'api',
      categories: ['telecom', 'messaging'],
      base_url: 'https://api.twilio.com',
      auth_scheme: { type: 'basic' },
    });
    expect(record.endpoints[0]).toEqual({ method: expect.any(String), path: expect.any(String), summary: expect.any(String) });
    expect(record.instructions).toContain('/api/v1/proxy/twilio.com-api/');
    expect(plainText('<p>Hello <b>world</b> &amp; [docs](https://x.y) **bold**</p>')).toBe('Hello world & docs bold');
    expect(plainText('word '.repeat(1000), 50).length).toBeLessThanOrEqual(50);
  });
});
