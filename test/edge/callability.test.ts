import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformKeyContext, sealSecret } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { createKey } from '#db/keys';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

// "Can I call this?" (issue 30 §1, docs/decisions/callability-states.md): for a new account,
// GET /apis?callable=true lists exactly the APIs it can call, checked against a set computed here
// from the catalog's own rows; then the sets move as the account connects a key, the operator
// registers an OAuth app and the account gets an OAuth connection. The OAuth apps and connections
// are rows inserted directly (sealed dummy values): data, the way the operator CLI and the consent
// flow leave it.

interface Callability {
  state: 'ready' | 'needs_key' | 'needs_oauth' | 'unavailable';
  reason: string;
  hint?: string;
  keyDocsUrl?: string;
  provider?: string;
}
interface Summary {
  id: string;
  callability: Callability;
}
interface Page {
  apis: Summary[];
  nextCursor: string | null;
  hint?: string;
}

const CARRIED = new Set(['none', 'apiKey', 'bearer', 'basic', 'oauth2']);

describe('callability: GET /apis?callable=true and the state of each API, per caller', () => {
  let app: FastifyInstance;
  let edge: string;
  let account: TestAccount;
  const clients: Client[] = [];
  const provider = `login.${uniqueId('idp').toLowerCase()}.provider.dev`;
  const ownProvider = `auth.${uniqueId('own').toLowerCase()}.provider.dev`;
  /** APIs given special rows by this test. */
  const picked = {
    platformKeyed: [] as string[],
    oauthApis: [] as string[],
    ownAppApi: '',
    passwordOnly: '',
    placeholder: '',
    undescribed: '',
    unsupported: '',
    keyWithDocs: '',
    keyToConnect: '',
    noAuth: '',
  };

  const get = (url: string, key?: string) => app.inject({ method: 'GET', url, headers: key ? bearer(key) : {} });

  /** Every id GET /apis?callable=true lists for the caller, page after page. */
  async function callableIds(key?: string, extra = ''): Promise<Set<string>> {
    const ids = new Set<string>();
    let cursor: string | null = null;
    do {
      const page: Page = expectOk<Page>(await get(`/api/v1/apis?callable=true&limit=200${extra}${cursor ? `&cursor=${cursor}` : ''}`, key));
      for (const api of page.apis) {
        expect(api.callability.state, JSON.stringify(api)).toBe('ready');
        ids.add(api.id);
      }
      cursor = page.nextCursor;
    } while (cursor);
    return ids;
  }

  /**
   * The expectation, from the catalog rows alone: no auth, or a carried scheme with a platform key,
   * or (for an account) its own key, or an OAuth 2 API whose provider it has a ready connection for.
   */
  async function expectedReady(accountId: string | null): Promise<Set<string>> {
    const rows = await app.deps.sql<{ id: string; type: string; platform_key: boolean; oauth_provider: string | null }[]>`
      select id, coalesce(auth_scheme->>'type', 'none') as type, platform_key_encrypted is not null as platform_key, oauth_provider from apis`;
    const keys = accountId
      ? (await app.deps.sql<{ api_id: string }[]>`select api_id from connections where account_id = ${accountId}`).map((r) => r.api_id)
      : [];
    const providers = accountId
      ? (await app.deps.sql<{ provider: string }[]>`select provider from oauth_connections where account_id = ${accountId} and status = 'ready'`).map(
          (r) => r.provider,
        )
      : [];
    return new Set(
      rows
        .filter(
          (r) =>
            r.type === 'none' ||
            (CARRIED.has(r.type) && (r.platform_key || keys.includes(r.id))) ||
            (r.type === 'oauth2' && r.oauth_provider !== null && providers.includes(r.oauth_provider)),
        )
        .map((r) => r.id),
    );
  }

  const sorted = (set: Set<string>) => [...set].sort();

  async function stateOf(id: string, key?: string): Promise<Callability> {
    return expectOk<{ api: Summary }>(await get(`/api/v1/apis/${id}`, key)).api.callability;
  }

  async function connect(key: string): Promise<Client> {
    const client = new Client({ name: 'callability-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => key } }));
    clients.push(client);
    return client;
  }
  function toolOk<T>(result: CallToolResult): T {
    expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 600)).toBe(false);
    return result.structuredContent as T;
  }

  beforeAll(async () => {
    app = await createTestApp({ REDIS_PREFIX: uniqueId('callability') });
    const { sql, settings } = app.deps;
    // Rows picked from the imported catalog by scheme (the test database is this file's own copy).
    const byType = async (type: string, count: number) =>
      (await sql<{ id: string }[]>`select id from apis where auth_scheme->>'type' = ${type} order by id limit ${count}`).map((r) => r.id);
    const [apiKeys, bearers, oauths, nones] = await Promise.all([byType('apiKey', 4), byType('bearer', 1), byType('oauth2', 9), byType('none', 1)]);
    picked.platformKeyed = [apiKeys[0]!, bearers[0]!, oauths[0]!];
    picked.keyWithDocs = apiKeys[1]!;
    picked.keyToConnect = apiKeys[2]!;
    picked.unsupported = apiKeys[3]!;
    picked.oauthApis = oauths.slice(1, 4);
    picked.ownAppApi = oauths[4]!;
    picked.passwordOnly = oauths[5]!;
    picked.placeholder = oauths[6]!;
    picked.undescribed = oauths[7]!;
    picked.noAuth = nones[0]!;
    for (const id of picked.platformKeyed) {
      await sql`update apis set platform_key_encrypted = ${sealSecret(settings.CONNECTIONS_MASTER_KEY, 'dummy-platform-key', platformKeyContext(id))} where id = ${id}`;
    }
    await sql`update apis set key_docs_url = 'https://developer.example.org/keys' where id = ${picked.keyWithDocs}`;
    await sql`update apis set auth_scheme = '{"type": "mutualTLS"}' where id = ${picked.unsupported}`;
    const codeFlow = (host: string) => ({
      flows: { authorizationCode: { authorizationUrl: `https://${host}/authorize`, tokenUrl: `https://${host}/token` } },
      scopes: { read: 'Read' },
    });
    for (const id of picked.oauthApis)
      await sql`update apis set oauth = ${sql.json(codeFlow(provider))}, oauth_provider = ${provider} where id = ${id}`;
    await sql`update apis set oauth = ${sql.json(codeFlow(ownProvider))}, oauth_provider = ${ownProvider} where id = ${picked.ownAppApi}`;
    // A description whose only OAuth flow is the password flow: the importer keeps no `oauth` for it.
    await sql`update apis set oauth = null, oauth_provider = null where id = ${picked.passwordOnly}`;
    // As the importer leaves a description whose authorization server is a placeholder: flows, no provider.
    await sql`update apis set oauth = ${sql.json(codeFlow('authserver.example'))}, oauth_provider = null where id = ${picked.placeholder}`;
    await sql`update apis set oauth = null, oauth_provider = null where id = ${picked.undescribed}`;
    await loadCookbooks(sql);
    account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await app?.close();
  });

  it('lists exactly the APIs a new account can call, computed from the catalog, for anonymous and authenticated callers alike', async () => {
    const expected = await expectedReady(null);
    expect(expected.size).toBeGreaterThan(400);
    for (const id of picked.platformKeyed) expect(expected.has(id)).toBe(true);
    const anonymous = await callableIds();
    expect(sorted(anonymous)).toEqual(sorted(expected));
    const fresh = await callableIds(account.fullKey);
    expect(sorted(fresh)).toEqual(sorted(await expectedReady(account.accountId)));
    expect(sorted(fresh)).toEqual(sorted(anonymous));
    // Within a category, only that category's callable ones.
    const [category] = await app.deps.sql<{ c: string }[]>`select unnest(categories) as c from apis group by 1 order by count(*) desc limit 1`;
    const inCategory = await callableIds(undefined, `&category=${category!.c}`);
    expect(inCategory.size).toBeGreaterThan(0);
    for (const id of inCategory) expect(anonymous.has(id)).toBe(true);
  });

  it('says why each API is in its state, with what it takes', async () => {
    expect(await stateOf(picked.noAuth)).toEqual({ state: 'ready', reason: 'no_auth' });
    for (const id of picked.platformKeyed) expect(await stateOf(id)).toMatchObject({ state: 'ready', reason: 'platform_key' });
    const key = await stateOf(picked.keyWithDocs);
    expect(key).toMatchObject({ state: 'needs_key', reason: 'key_required', keyDocsUrl: 'https://developer.example.org/keys' });
    expect(key.hint).toContain(`POST /api/v1/connect/${picked.keyWithDocs}`);
    expect(key.hint).toContain('https://developer.example.org/keys');
    expect(await stateOf(picked.unsupported)).toMatchObject({ state: 'unavailable', reason: 'unsupported_scheme' });
    expect((await stateOf(picked.unsupported)).hint).toContain('mutualTLS');
    for (const id of picked.oauthApis) {
      const oauth = await stateOf(id);
      expect(oauth).toMatchObject({ state: 'unavailable', reason: 'no_oauth_app', provider });
      expect(oauth.hint).toContain(provider);
    }
    expect(await stateOf(picked.passwordOnly)).toMatchObject({ state: 'unavailable', reason: 'oauth_not_described' });
    expect((await stateOf(picked.passwordOnly)).hint).toContain('password flow');
    expect(await stateOf(picked.placeholder)).toMatchObject({ state: 'unavailable', reason: 'placeholder_provider' });
    expect(await stateOf(picked.undescribed)).toMatchObject({ state: 'unavailable', reason: 'oauth_not_described' });
    // Search, category listing and discovery carry the same field.
    const search = expectOk<Page>(await get('/api/v1/apis?q=weather&limit=20'));
    expect(search.apis.length).toBeGreaterThan(0);
    for (const api of search.apis) expect(Object.keys(api.callability)).toContain('state');
    const [top] = await app.deps.sql<{ c: string }[]>`select unnest(categories) as c from apis group by 1 order by count(*) desc limit 1`;
    const category = expectOk<Page>(await get(`/api/v1/apis/category/${top!.c}?limit=20`));
    expect(category.apis.length).toBeGreaterThan(0);
    for (const api of category.apis) expect(Object.keys(api.callability)).toContain('reason');
  });

  it('filters search and discovery to what the caller can call now', async () => {
    const anonymous = await callableIds();
    const all = expectOk<Page>(await get('/api/v1/apis?q=sms&limit=50'));
    expect(all.apis.some((a) => a.callability.state !== 'ready')).toBe(true);
    const callable = expectOk<Page>(await get('/api/v1/apis?q=sms&limit=50&callable=true'));
    for (const api of callable.apis) expect(anonymous.has(api.id), api.id).toBe(true);
    expect(callable.apis.length).toBeLessThan(all.apis.length);
    type Discovery = { results: { api: Summary }[]; hint?: string };
    const task = 'q=send%20a%20text%20message%20to%20a%20phone&limit=20';
    const discovered = expectOk<Discovery>(await get(`/api/v1/discover?${task}`));
    expect(discovered.results.some((r) => r.api.callability.state !== 'ready')).toBe(true);
    const ready = expectOk<Discovery>(await get(`/api/v1/discover?${task}&callable=true`));
    for (const r of ready.results) expect(r.api.callability.state, JSON.stringify(r.api)).toBe('ready');
    expect(ready.results.map((r) => r.api.id)).not.toEqual(discovered.results.map((r) => r.api.id));
    // A filter value that is not a boolean is refused.
    expectError(await get('/api/v1/apis?callable=yes'), 400, 'validation_failed');
  });

  it('moves the sets as the account connects a key, the operator registers an OAuth app and the account connects with OAuth', async () => {
    const { sql, settings } = app.deps;
    const other = await createTestAccount(sql);
    const base = await callableIds();

    // 1. The account's own key: ready for it (own_key), still needs_key for everyone else.
    expectOk(
      await app.inject({
        method: 'POST',
        url: `/api/v1/connect/${picked.keyToConnect}`,
        headers: bearer(account.fullKey),
        payload: { apiKey: 'dummy-own-key-123456' },
      }),
      201,
    );
    expect(await stateOf(picked.keyToConnect, account.fullKey)).toMatchObject({ state: 'ready', reason: 'own_key' });
    expect(await stateOf(picked.keyToConnect, other.fullKey)).toMatchObject({ state: 'needs_key' });
    expect(await stateOf(picked.keyToConnect)).toMatchObject({ state: 'needs_key' });
    const withKey = await callableIds(account.fullKey);
    expect(sorted(withKey)).toEqual(sorted(await expectedReady(account.accountId)));
    expect(sorted(withKey)).toEqual(sorted(new Set([...base, picked.keyToConnect])));
    expect(sorted(await callableIds())).toEqual(sorted(base));

    // 2. The operator's OAuth app for the provider: its APIs become needs_oauth for every caller
    // (the operator's providers are read again within seconds), and none is callable yet.
    await sql`insert into oauth_apps (provider, account_id, client_id, client_secret_encrypted, authorization_url, token_url)
              values (${provider}, null, 'operator-client', ${sealSecret(settings.CONNECTIONS_MASTER_KEY, 'dummy-secret', `oauth-app:${provider}`)},
                      ${`https://${provider}/authorize`}, ${`https://${provider}/token`})`;
    await expect.poll(async () => (await stateOf(picked.oauthApis[0]!)).state, { timeout: 15_000, interval: 500 }).toBe('needs_oauth');
    for (const id of picked.oauthApis) {
      const state = await stateOf(id, other.fullKey);
      expect(state).toMatchObject({ state: 'needs_oauth', reason: 'oauth_app', provider });
      expect(state.hint).toContain(`POST /api/v1/connect/${id}/request`);
    }
    // The password-only API stays unavailable: the platform cannot run that flow.
    expect(await stateOf(picked.passwordOnly)).toMatchObject({ state: 'unavailable', reason: 'oauth_not_described' });
    expect(sorted(await callableIds())).toEqual(sorted(base));

    // 3. A ready OAuth connection of the account for that provider: its APIs are ready for it alone.
    const [app1] = await sql<{ id: string }[]>`select id from oauth_apps where provider = ${provider} and account_id is null`;
    await sql`insert into oauth_connections (account_id, provider, label, is_default, app_id, grant_type, access_token_encrypted, status)
              values (${account.accountId}, ${provider}, 'work', true, ${app1!.id}, 'authorization_code',
                      ${sealSecret(settings.CONNECTIONS_MASTER_KEY, 'dummy-access-token', 'oauth-token')}, 'ready')`;
    const withOauth = await callableIds(account.fullKey);
    const expectedWithOauth = await expectedReady(account.accountId);
    expect(
      [...withOauth].filter((id) => !expectedWithOauth.has(id)),
      'callable but not expected',
    ).toEqual([]);
    expect(
      [...expectedWithOauth].filter((id) => !withOauth.has(id)),
      'expected but not callable',
    ).toEqual([]);
    expect(sorted(withOauth)).toEqual(sorted(new Set([...base, picked.keyToConnect, ...picked.oauthApis])));
    expect(await stateOf(picked.oauthApis[1]!, account.fullKey)).toMatchObject({ state: 'ready', reason: 'oauth_connection', provider });
    expect(sorted(await callableIds(other.fullKey))).toEqual(sorted(base));

    // 4. The connection needs a person again: needs_oauth with a reconnect hint, and not callable.
    await sql`update oauth_connections set status = 'needs_reauth' where account_id = ${account.accountId} and provider = ${provider}`;
    const reauth = await stateOf(picked.oauthApis[2]!, account.fullKey);
    expect(reauth).toMatchObject({ state: 'needs_oauth', reason: 'reauth_required' });
    expect(reauth.hint).toMatch(/reconnect/i);
    expect(sorted(await callableIds(account.fullKey))).toEqual(sorted(new Set([...base, picked.keyToConnect])));

    // 5. The account's own OAuth app for another provider: needs_oauth for it, unavailable for others.
    await sql`insert into oauth_apps (provider, account_id, client_id, authorization_url, token_url)
              values (${ownProvider}, ${account.accountId}, 'own-client', ${`https://${ownProvider}/authorize`}, ${`https://${ownProvider}/token`})`;
    expect(await stateOf(picked.ownAppApi, account.fullKey)).toMatchObject({ state: 'needs_oauth', reason: 'own_oauth_app' });
    expect(await stateOf(picked.ownAppApi, other.fullKey)).toMatchObject({ state: 'unavailable', reason: 'no_oauth_app' });
    expect(await stateOf(picked.ownAppApi)).toMatchObject({ state: 'unavailable', reason: 'no_oauth_app' });
  });

  it('limits an agent key to its allow-list: the others are unavailable to it (key_not_allowed)', async () => {
    const { key: _row, fullKey } = await createKey(app.deps.sql, {
      accountId: account.accountId,
      kind: 'agent',
      name: 'narrow agent',
      spendLimitMicros: null,
      allowedApis: [picked.noAuth, picked.keyWithDocs],
      expiresAt: null,
    });
    expect(sorted(await callableIds(fullKey))).toEqual([picked.noAuth]);
    expect(await stateOf(picked.keyWithDocs, fullKey)).toMatchObject({ state: 'needs_key' });
    const outside = await stateOf(picked.platformKeyed[0]!, fullKey);
    expect(outside).toMatchObject({ state: 'unavailable', reason: 'key_not_allowed' });
  });

  it('answers a bad key on the public directory routes with 401 and ignores a stale dashboard cookie', async () => {
    expectError(await get('/api/v1/apis?callable=true', 'service_sk_' + '0'.repeat(48)), 401);
    const res = await app.inject({ method: 'GET', url: `/api/v1/apis/${picked.noAuth}`, headers: { cookie: 'session=not-a-session' } });
    expect(expectOk<{ api: Summary }>(res).api.callability.state).toBe('ready');
  });

  it('states in the instructions, at serve time, how this caller can call the API', async () => {
    type Instructions = { instructions: string };
    const ready = expectOk<Instructions>(await get(`/api/v1/apis/${picked.keyToConnect}/instructions`, account.fullKey)).instructions;
    expect(ready).toContain('## How to call it now');
    expect(ready).toContain('**ready** (`own_key`)');
    const other = await createTestAccount(app.deps.sql, { balanceMicros: 100_000n });
    const needsKey = expectOk<Instructions>(await get(`/api/v1/apis/${picked.keyToConnect}/instructions`, other.fullKey)).instructions;
    expect(needsKey).toContain('**needs_key** (`key_required`)');
    expect(needsKey).toContain(`POST /api/v1/connect/${picked.keyToConnect}`);
  });

  it('carries the state and its hint in the MCP tools that list and describe APIs', async () => {
    const client = await connect(account.fullKey);
    const listed = toolOk<Page>((await client.callTool({ name: 'search_apis', arguments: { callable: true, limit: 200 } })) as CallToolResult);
    expect(listed.apis.length).toBeGreaterThan(0);
    for (const api of listed.apis) expect(api.callability.state).toBe('ready');
    expect(listed.apis.map((a) => a.id)).toContain(picked.keyToConnect);
    const detail = toolOk<{ api: Summary }>((await client.callTool({ name: 'get_api', arguments: { id: picked.keyWithDocs } })) as CallToolResult);
    expect(detail.api.callability).toMatchObject({ state: 'needs_key', keyDocsUrl: 'https://developer.example.org/keys' });
    expect(detail.api.callability.hint).toContain('POST /api/v1/connect/');
    const discovered = toolOk<{ results: { api: Summary }[] }>(
      (await client.callTool({ name: 'discover_apis', arguments: { query: 'send a text message', callable: true } })) as CallToolResult,
    );
    for (const r of discovered.results) expect(r.api.callability.state).toBe('ready');
  });

  it('orders cookbook slot suggestions callable first, and refuses to start with an API the caller cannot call', async () => {
    const { sql } = app.deps;
    const suggestions = [picked.keyWithDocs, picked.unsupported, 'not-an-api-id', picked.noAuth];
    await sql`update cookbooks set slots = jsonb_set(slots, '{1,suggestedProviders}', ${sql.json(suggestions)}) where id = 'weather-alert-sms'`;
    type Slot = { name: string; suggestedProviders: string[]; suggestions: { apiId: string; callability: Callability }[] };
    const cookbook = expectOk<{ cookbook: { slots: Slot[] } }>(await get('/api/v1/cookbooks/weather-alert-sms', account.fullKey)).cookbook;
    const sms = cookbook.slots[1]!;
    expect(sms.suggestedProviders).toEqual([picked.noAuth, picked.keyWithDocs, picked.unsupported, 'not-an-api-id']);
    expect(sms.suggestions.map((s) => [s.apiId, s.callability.state])).toEqual([
      [picked.noAuth, 'ready'],
      [picked.keyWithDocs, 'needs_key'],
      [picked.unsupported, 'unavailable'],
    ]);
    const start = (sms: string) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: bearer(account.fullKey),
        payload: { selectedApis: { weather: picked.noAuth, sms } },
      });
    const refused = expectError(await start(picked.keyWithDocs), 409, 'api_not_callable');
    expect(refused.error).toContain('Slot "sms"');
    expect(refused.hint).toContain(`POST /api/v1/connect/${picked.keyWithDocs}`);
    expect(refused.hint).toContain('callable=true');
    const unavailable = expectError(await start(picked.unsupported), 409, 'api_not_callable');
    expect(unavailable.error).toContain('unavailable');
  });
});
