import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiIdFor, directoryRoot, importDirectory, isPlaceholderHost, normalizeSpec, reindexApi, sourceCategories } from '#core/directory';
import type { ApiOAuth } from '#contracts/auth-scheme';
import { getMeteredApi } from '#db/metered-apis';
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

  it('normalizes categories: a category spelt a letter per entry is read whole; letters and junk are dropped', () => {
    expect(sourceCategories({ 'x-apisguru-categories': ['s', 'e', 'c', 'u', 'r', 'i', 't', 'y'] })).toEqual(['security']);
    expect(sourceCategories({ 'x-apisguru-categories': 'Open_Data' })).toEqual(['open_data']);
    expect(sourceCategories({ 'x-apisguru-categories': ['media', 'x', 'two words', '', 7, 'media'] })).toEqual(['media']);
  });
});

/** Rows of the catalog the suite's global setup imported with this importer (test/helpers/directory-setup.ts). */
describe('OAuth 2 descriptions, scopes and key documentation in the imported catalog', () => {
  interface Row {
    id: string;
    auth_scheme: { type: string };
    oauth: ApiOAuth | null;
    oauth_provider: string | null;
    key_docs_url: string | null;
    endpoints: { method: string; path: string; summary: string; scopes?: string[] }[];
  }
  const row = async (id: string) => {
    const [found] = await sql<Row[]>`select id, auth_scheme, oauth, oauth_provider, key_docs_url, endpoints from apis where id = ${id}`;
    expect(found, id).toBeDefined();
    return found!;
  };
  const endpoint = (r: Row, method: string, path: string) => r.endpoints.find((e) => e.method === method && e.path === path);

  it("keeps a Google API: its authorization code and implicit flows, scopes with descriptions and each operation's scopes", async () => {
    const sheets = await row('googleapis.com-sheets');
    expect(sheets.auth_scheme).toEqual({ type: 'oauth2' });
    expect(sheets.oauth_provider).toBe('accounts.google.com');
    expect(sheets.oauth!.flows).toEqual({
      authorizationCode: { authorizationUrl: 'https://accounts.google.com/o/oauth2/auth', tokenUrl: 'https://accounts.google.com/o/oauth2/token' },
      implicit: { authorizationUrl: 'https://accounts.google.com/o/oauth2/auth' },
    });
    expect(sheets.oauth!.scopes).toMatchObject({
      'https://www.googleapis.com/auth/spreadsheets.readonly': 'See all your Google Sheets spreadsheets',
      'https://www.googleapis.com/auth/drive.file': 'See, edit, create, and delete only the specific Google Drive files you use with this app',
    });
    expect(Object.keys(sheets.oauth!.scopes)).toHaveLength(5);
    // Google lists each scope that grants an operation as an alternative: all of them are kept, in order.
    expect(endpoint(sheets, 'GET', '/v4/spreadsheets/{spreadsheetId}')?.scopes).toEqual([
      'https://www.googleapis.com/auth/drive',
      'https://www.googleapis.com/auth/drive.file',
      'https://www.googleapis.com/auth/drive.readonly',
      'https://www.googleapis.com/auth/spreadsheets',
      'https://www.googleapis.com/auth/spreadsheets.readonly',
    ]);
    expect(endpoint(sheets, 'POST', '/v4/spreadsheets')?.scopes).not.toContain('https://www.googleapis.com/auth/spreadsheets.readonly');
    // Google's "register a client" link, from info.x-apiClientRegistration.
    expect(sheets.key_docs_url).toBe('https://console.developers.google.com/');
  });

  it('keeps a Microsoft API that declares only the implicit flow, with no token URL', async () => {
    const azure = await row('azure.com-enterpriseknowledgegraph-enterpriseknowledgegraphswagger');
    expect(azure).toMatchObject({
      auth_scheme: { type: 'oauth2' },
      oauth_provider: 'login.microsoftonline.com',
      oauth: {
        flows: { implicit: { authorizationUrl: 'https://login.microsoftonline.com/common/oauth2/authorize' } },
        scopes: { user_impersonation: 'impersonate your user account' },
      },
    });
    expect(Object.keys(azure.oauth!.flows)).toEqual(['implicit']);
  });

  it("keeps authorization code APIs with their token URL (Xero, HubSpot) and their operations' scopes", async () => {
    const xero = await row('xero.com-xero_accounting');
    expect(xero.oauth_provider).toBe('login.xero.com');
    expect(xero.oauth!.flows).toEqual({
      authorizationCode: {
        authorizationUrl: 'https://login.xero.com/identity/connect/authorize',
        tokenUrl: 'https://identity.xero.com/connect/token',
      },
    });
    expect(xero.oauth!.scopes['accounting.attachments']).toBe('Grant read-write access to attachments');
    expect(endpoint(xero, 'GET', '/Accounts')?.scopes).toEqual(['accounting.settings']);
    expect(xero.key_docs_url).toBe('https://developer.xero.com/');
    const hubspot = await row('hubapi.com-files');
    expect(hubspot).toMatchObject({
      oauth_provider: 'app.hubspot.com',
      oauth: {
        flows: {
          authorizationCode: { authorizationUrl: 'https://app.hubspot.com/oauth/authorize', tokenUrl: 'https://api.hubapi.com/oauth/v1/token' },
        },
      },
    });
    expect(endpoint(hubspot, 'POST', '/files/v3/files')?.scopes).toEqual(['files']);
  });

  it("keeps client credentials APIs; one that names no authorization URL takes its provider's key from its token URL's other APIs", async () => {
    const deal = await row('ebay.com-buy-deal');
    expect(deal.oauth!.flows).toEqual({ clientCredentials: { tokenUrl: 'https://api.ebay.com/identity/v1/oauth2/token' } });
    expect(deal.oauth!.scopes).toEqual({ 'https://api.ebay.com/oauth/api_scope/buy.deal': 'View eBay sale events and deals.' });
    expect(endpoint(deal, 'GET', '/deal_item')?.scopes).toEqual(['https://api.ebay.com/oauth/api_scope/buy.deal']);
    // eBay's other APIs authorize at auth.ebay.com with the same token URL: one eBay app serves them all.
    expect(deal.oauth_provider).toBe('auth.ebay.com');
    const [ebay] = await sql<{ providers: string[] }[]>`
      select array_agg(distinct oauth_provider order by oauth_provider) as providers from apis where provider in ('ebay.com', 'apiz.ebay.com') and oauth is not null`;
    expect(ebay!.providers).toEqual(['auth.ebay.com']);
    const alerter = await row('alertersystem.com');
    expect(alerter).toMatchObject({
      oauth_provider: 'alertersystem.com',
      oauth: { flows: { clientCredentials: { tokenUrl: 'https://alertersystem.com/oauth/v2/access-token/' } }, scopes: { full: 'Full access' } },
    });
  });

  it('keeps the flows of an API whose authorization server is a placeholder, with no provider to connect through', async () => {
    const banking = await row('openbanking.org.uk-account-info-openapi');
    expect(banking.oauth!.flows.authorizationCode).toEqual({
      authorizationUrl: 'https://authserver.example/authorization',
      tokenUrl: 'https://authserver.example/token',
    });
    expect(banking.oauth_provider).toBeNull();
    for (const host of [
      'authserver.example',
      'keycloak.example.com',
      'vectara-prod-your_vectara_customer_id.auth.us-west-2.amazoncognito.com',
      'mastodon.local',
      '127.0.0.1',
      'localhost',
    ])
      expect(isPlaceholderHost(host), host).toBe(true);
    for (const host of ['accounts.google.com', 'login.microsoftonline.com', 'link.test.enode.io', 'tldev.eu.auth0.com'])
      expect(isPlaceholderHost(host), host).toBe(false);
  });

  it('counts providers as the catalog declares them, with no placeholder, and operation scopes only where OAuth is', async () => {
    const providers = await sql<{ provider: string; n: number }[]>`
      select oauth_provider as provider, count(*)::int as n from apis where source = 'apis.guru' and oauth_provider is not null
       group by 1 order by 2 desc, 1`;
    const count = Object.fromEntries(providers.map((p) => [p.provider, p.n]));
    expect(count).toMatchObject({
      'login.microsoftonline.com': 613,
      'accounts.google.com': 266,
      'auth.ebay.com': 22,
      'app.hubspot.com': 9,
      'login.xero.com': 6,
    });
    for (const { provider } of providers) expect(isPlaceholderHost(provider), provider).toBe(false);
    const [stats] = await sql<{ oauth: number; implicit_only: number; stray_scopes: number; provider_without_oauth: number; http_docs: number }[]>`
      select count(*) filter (where oauth is not null)::int as oauth,
             count(*) filter (where oauth->'flows' ?& array['implicit'] and not (oauth->'flows' ?| array['authorizationCode', 'clientCredentials']))::int as implicit_only,
             count(*) filter (where oauth is null and exists (select 1 from jsonb_array_elements(endpoints) e where e ? 'scopes'))::int as stray_scopes,
             count(*) filter (where oauth is null and oauth_provider is not null)::int as provider_without_oauth,
             count(*) filter (where key_docs_url is not null and key_docs_url !~ '^https://')::int as http_docs
        from apis where source = 'apis.guru'`;
    expect(stats).toMatchObject({ stray_scopes: 0, provider_without_oauth: 0, http_docs: 0 });
    expect(stats!.oauth).toBeGreaterThan(1000);
    expect(stats!.implicit_only).toBeGreaterThan(600);
  });

  it('finds where to get a key: a scheme description link, an API description link about keys, externalDocs', async () => {
    expect((await row('adyen.com-checkoutservice-v71')).key_docs_url).toBe(
      'https://docs.adyen.com/development-resources/api-credentials#generate-api-key',
    );
    expect((await row('digitalocean.com')).key_docs_url).toBe('https://cloud.digitalocean.com/account/api/tokens');
    // An address in a code example of the description is not documentation; externalDocs is.
    expect((await row('threatjammer.com')).key_docs_url).toBe('https://threatjammer.com/docs/index');
    // No key needed, no link.
    expect((await row('xkcd.com')).key_docs_url).toBeNull();
  });

  it("reads the OAuth fields into the proxy's view of an API", async () => {
    const api = await getMeteredApi(sql, 'googleapis.com-sheets');
    expect(api).toMatchObject({ oauthProvider: 'accounts.google.com', keyDocsUrl: 'https://console.developers.google.com/' });
    expect(api!.oauth!.flows.authorizationCode?.tokenUrl).toBe('https://accounts.google.com/o/oauth2/token');
  });

  it('has no junk categories', async () => {
    const categories = await sql<{ category: string }[]>`select distinct unnest(categories) as category from apis where source = 'apis.guru'`;
    for (const { category } of categories) expect(category).toMatch(/^[a-z][a-z0-9_]+$/);
    expect((await sql<{ categories: string[] }[]>`select categories from apis where id = 'threatjammer.com'`)[0]?.categories).toEqual(['security']);
  });

  it('re-imports real OAuth descriptions idempotently', async () => {
    const files = new Set([
      'googleapis.com/sheets.json',
      'xero.com/xero_accounting.json',
      'ebay.com/buy-deal.json',
      'openbanking.org.uk/account-info-openapi.json',
    ]);
    const before = await sql`select id, oauth, oauth_provider, key_docs_url, endpoints from apis where source_path = any(${[...files]}) order by id`;
    expect(before).toHaveLength(4);
    const forced = await importDirectory(sql, { defaultPriceMicros: 1000n, filter: (path) => files.has(path), force: true });
    expect(forced).toMatchObject({ processed: 4, updated: 4, inserted: 0, failed: 0 });
    const again = await importDirectory(sql, { defaultPriceMicros: 1000n, filter: (path) => files.has(path) });
    expect(again).toMatchObject({ processed: 4, updated: 0, inserted: 0, unchanged: 4 });
    const after = await sql`select id, oauth, oauth_provider, key_docs_url, endpoints from apis where source_path = any(${[...files]}) order by id`;
    expect(after).toEqual(before);
  });
});
