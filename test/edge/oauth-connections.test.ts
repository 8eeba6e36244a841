import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runApiCli } from '#cli/api-cli';
import { oauthAccessTokenContext, oauthRefreshTokenContext } from '#core/oauth';
import { openSecret } from '#core/platform';
import { buildApp, edgeLogger } from '#edge/app';
import { bearer, expectError, expectOk } from '../helpers/app.js';
import { startTestOAuthProvider, type TestOAuthProvider, registerOperatorOAuthApp } from '../helpers/oidc-provider.js';
import { freePort } from '../helpers/ports.js';
import { loginUser, registerUser, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { registerApi } from '../helpers/upstream.js';

interface Connection {
  id: string;
  provider: string;
  label: string;
  isDefault: boolean;
  status: string;
  scopes: string[];
  expiresAt: string | null;
  grantType: string;
}

const cliEnv = () => ({ ...process.env, DATABASE_URL: testDatabaseUrl() });

describe('managed OAuth 2: consent flow, connections and tokens', () => {
  let app: FastifyInstance;
  let provider: TestOAuthProvider;
  let publicUrl: string;
  let apiId: string;
  /** Every line the edge logged: no token, code, state or secret may be in any of them. */
  const logLines: string[] = [];

  beforeAll(async () => {
    publicUrl = `http://127.0.0.1:${await freePort()}`;
    provider = await startTestOAuthProvider({ redirectUris: [`${publicUrl}/api/v1/oauth/callback`], accessTokenTtl: 120 });
    const settings = testEdgeSettings({
      PUBLIC_URL: publicUrl,
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('oauth'),
      LOG_LEVEL: 'debug',
    });
    app = await buildApp(settings, { logger: { ...(edgeLogger(settings) as object), stream: { write: (line: string) => logLines.push(line) } } });
    await registerOperatorOAuthApp(provider, cliEnv());
    // An imported OAuth API, as the importer leaves it: its provider, declared scopes and the scopes its operations need.
    apiId = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', byokPrice: '0.002', auth: 'oauth2' });
    await runApiCli(
      ['update', '--id', apiId, '--oauth-authorization-url', provider.authorizationUrl, '--oauth-token-url', provider.tokenUrl],
      cliEnv(),
    );
    await app.deps.sql`
      update apis set
        oauth = ${app.deps.sql.json({
          flows: { authorizationCode: { authorizationUrl: provider.authorizationUrl, tokenUrl: provider.tokenUrl } },
          scopes: { read: 'Read your things', write: 'Change your things', admin: 'Everything' },
        })},
        endpoints = ${app.deps.sql.json([
          { method: 'GET', path: '/things', summary: 'List things', scopes: ['read'] },
          { method: 'POST', path: '/things', summary: 'Add a thing', scopes: ['read', 'write'] },
        ])}
      where id = ${apiId}`;
  });
  afterAll(async () => {
    await app?.close();
    await provider?.close();
  });

  const signIn = async (): Promise<{ user: RegisteredUser; browser: BrowserSession }> => {
    const user = await registerUser(app);
    return { user, browser: await loginUser(app, user) };
  };

  const authorize = (browser: BrowserSession, body: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: '/api/v1/oauth/authorize', headers: browser.writeHeaders, payload: body });

  /** The browser coming back to the platform's callback (a top-level navigation from the provider's site). */
  const callback = (url: URL, cookie: string | null) =>
    app.inject({
      method: 'GET',
      url: `${url.pathname}${url.search}`,
      headers: { ...(cookie ? { cookie } : {}), 'sec-fetch-site': 'cross-site' },
    });

  const landedAt = (res: LightMyRequestResponse) => {
    expect(res.statusCode, res.body).toBe(303);
    return new URL(String(res.headers.location));
  };

  const connections = async (browser: BrowserSession) =>
    expectOk<{ connections: Connection[] }>(await app.inject({ method: 'GET', url: '/api/v1/me/connections', headers: { cookie: browser.cookie } }))
      .connections;

  /** The whole flow for a signed-in person: start, provider login and consent, callback. Returns the new connection. */
  const connect = async (browser: BrowserSession, body: Record<string, unknown> = { apiId }) => {
    const started = expectOk<{ authorizationUrl: string }>(await authorize(browser, body));
    const landed = landedAt(await callback(await provider.authorize(started.authorizationUrl), browser.cookie));
    expect(landed.searchParams.get('oauth'), landed.href).toMatch(/^(re)?connected$/);
    return (await connections(browser)).find((c) => c.id === landed.searchParams.get('connection'))!;
  };

  it('runs the code flow with PKCE and a session-bound state, and stores the tokens sealed', async () => {
    const { user, browser } = await signIn();
    const started = expectOk<{ authorizationUrl: string; provider: string; label: string; scopes: string[] }>(await authorize(browser, { apiId }));
    expect(started).toMatchObject({ provider: provider.host, label: 'default', scopes: ['read', 'write'] });
    const request = new URL(started.authorizationUrl);
    expect(`${request.origin}${request.pathname}`).toBe(provider.authorizationUrl);
    expect(request.searchParams.get('code_challenge_method')).toBe('S256');
    expect(request.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(request.searchParams.get('redirect_uri')).toBe(`${publicUrl}/api/v1/oauth/callback`);
    expect(request.searchParams.get('client_id')).toBe(provider.clientId);
    const state = request.searchParams.get('state')!;
    expect(state.length).toBeGreaterThanOrEqual(43);
    // Only the state's hash is stored.
    const stored = await app.deps.sql<{ state_hash: string }[]>`select state_hash from oauth_authorizations where account_id = ${user.accountId}`;
    expect(stored).toHaveLength(1);
    expect(stored[0]!.state_hash).not.toContain(state);

    const back = await provider.authorize(started.authorizationUrl);
    expect(`${back.origin}${back.pathname}`).toBe(`${publicUrl}/api/v1/oauth/callback`);
    expect(back.searchParams.get('code')).toBeTruthy();
    const res = await callback(back, browser.cookie);
    const landed = landedAt(res);
    expect(landed.pathname).toBe('/connections');
    expect(landed.searchParams.get('oauth')).toBe('connected');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(provider.tokenRequests).toContain('authorization_code');

    const [connection] = await connections(browser);
    expect(connection).toMatchObject({
      provider: provider.host,
      label: 'default',
      isDefault: true,
      status: 'ready',
      grantType: 'authorization_code',
    });
    expect(connection!.scopes.sort()).toEqual(['read', 'write']);
    expect(new Date(connection!.expiresAt!).getTime()).toBeGreaterThan(Date.now() + 60_000);

    const [row] = await app.deps.sql<{ access_token_encrypted: Buffer; refresh_token_encrypted: Buffer }[]>`
      select access_token_encrypted, refresh_token_encrypted from oauth_connections where id = ${connection!.id}`;
    const key = app.deps.settings.CONNECTIONS_MASTER_KEY;
    const access = openSecret(key, row!.access_token_encrypted, oauthAccessTokenContext(connection!.id));
    const refresh = openSecret(key, row!.refresh_token_encrypted, oauthRefreshTokenContext(connection!.id));
    expect(row!.access_token_encrypted.includes(Buffer.from(access))).toBe(false);
    expect((await provider.inspect(access))?.accountId).toBe('alice');
    expect((await provider.inspect(refresh))?.kind).toBe('RefreshToken');
    // Nothing secret in the list.
    const listed = await app.inject({ method: 'GET', url: '/api/v1/me/connections', headers: bearer(user.fullKey) });
    expect(listed.body).not.toContain(access);
    expect(listed.body).not.toContain(refresh);
    // The state was used once.
    expect(landedAt(await callback(back, browser.cookie)).searchParams.get('reason')).toBe('invalid_state');
  });

  it('refuses a state from another session, a replayed or unknown one, an expired one, and one without a session', async () => {
    const { browser } = await signIn();
    const other = await signIn();
    const first = expectOk<{ authorizationUrl: string }>(await authorize(browser, { apiId }));
    const back = await provider.authorize(first.authorizationUrl);
    // Another person's browser (or a login CSRF attempt) with this callback URL: refused, and the state is spent.
    expect(landedAt(await callback(back, other.browser.cookie)).searchParams.get('reason')).toBe('session_mismatch');
    expect(landedAt(await callback(back, browser.cookie)).searchParams.get('reason')).toBe('invalid_state');

    const second = expectOk<{ authorizationUrl: string }>(await authorize(browser, { apiId, label: 'second' }));
    const backAgain = await provider.authorize(second.authorizationUrl);
    expect(landedAt(await callback(backAgain, null)).searchParams.get('reason')).toBe('session_mismatch');

    const third = expectOk<{ authorizationUrl: string }>(await authorize(browser, { apiId, label: 'third' }));
    await app.deps.sql`update oauth_authorizations set expires_at = now() - interval '1 second' where label = 'third'`;
    expect(landedAt(await callback(await provider.authorize(third.authorizationUrl), browser.cookie)).searchParams.get('reason')).toBe('expired');

    const tampered = new URL(back);
    tampered.searchParams.set('state', 'not-a-state-we-issued');
    expect(landedAt(await callback(tampered, browser.cookie)).searchParams.get('reason')).toBe('invalid_state');
    expect(landedAt(await callback(new URL(`${publicUrl}/api/v1/oauth/callback`), browser.cookie)).searchParams.get('reason')).toBe('invalid_state');
    expect(await connections(browser)).toEqual([]);
  });

  it('brings a refusal at the provider back to the dashboard with its reason', async () => {
    const { browser } = await signIn();
    const started = expectOk<{ authorizationUrl: string }>(await authorize(browser, { apiId }));
    const landed = landedAt(await callback(await provider.authorize(started.authorizationUrl, { deny: true }), browser.cookie));
    expect(landed.searchParams.get('oauth')).toBe('error');
    expect(landed.searchParams.get('reason')).toBe('access_denied');
    expect(landed.searchParams.get('provider')).toBe(provider.host);
    expect(await connections(browser)).toEqual([]);
  });

  it('checks what a flow asks for: declared scopes, a free label, a session, an OAuth API with an app', async () => {
    const { user, browser } = await signIn();
    expectError(await authorize(browser, { apiId, scopes: ['read', 'delete_everything'] }), 400, 'validation_failed');
    expectError(await authorize(browser, {}), 400, 'validation_failed');
    expectError(await authorize(browser, { apiId, label: '  ' }), 400, 'validation_failed');
    expectError(await authorize(browser, { apiId: 'no-such-api-here' }), 404, 'not_found');
    const plain = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', auth: 'header:X-Key' });
    expectError(await authorize(browser, { apiId: plain }), 400, 'validation_failed');
    expectError(await authorize(browser, { provider: 'nobody.example.com' }), 409, 'oauth_not_configured');
    // A program with an API key cannot start a consent flow: a person gives consent.
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/oauth/authorize', headers: bearer(user.fullKey), payload: { apiId } }),
      403,
      'forbidden',
    );
    // The cookie alone is not enough for a change (CSRF).
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/oauth/authorize', headers: { cookie: browser.cookie }, payload: { apiId } }),
      403,
      'csrf_failed',
    );
    expectError(await app.inject({ method: 'POST', url: '/api/v1/oauth/authorize', payload: { apiId } }), 401);

    await connect(browser, { apiId, label: 'work' });
    expectError(await authorize(browser, { apiId, label: 'work' }), 409, 'conflict');
  });

  it('keeps several labelled connections per provider: default, rename, incremental consent, disconnect with revocation', async () => {
    const { user, browser } = await signIn();
    const work = await connect(browser, { apiId, label: 'work' });
    const personal = await connect(browser, { apiId, label: 'personal', scopes: ['read'] });
    expect(work.isDefault).toBe(true);
    expect(personal).toMatchObject({ isDefault: false, scopes: ['read'] });

    // Incremental consent: the same connection, more scopes.
    const widened = await connect(browser, { connectionId: personal.id, scopes: ['admin'] });
    expect(widened.id).toBe(personal.id);
    expect(widened.label).toBe('personal');
    expect(widened.scopes.sort()).toEqual(['admin', 'read']);

    const made = expectOk<{ connection: Connection }>(
      await app.inject({
        method: 'PATCH',
        url: `/api/v1/me/connections/${personal.id}`,
        headers: browser.writeHeaders,
        payload: { isDefault: true },
      }),
    );
    expect(made.connection.isDefault).toBe(true);
    expect((await connections(browser)).filter((c) => c.isDefault).map((c) => c.id)).toEqual([personal.id]);
    const renamed = expectOk<{ connection: Connection }>(
      await app.inject({ method: 'PATCH', url: `/api/v1/me/connections/${work.id}`, headers: bearer(user.fullKey), payload: { label: 'office' } }),
    );
    expect(renamed.connection.label).toBe('office');
    expectError(
      await app.inject({ method: 'PATCH', url: `/api/v1/me/connections/${work.id}`, headers: bearer(user.fullKey), payload: { label: 'personal' } }),
      409,
      'conflict',
    );
    expectError(await app.inject({ method: 'PATCH', url: `/api/v1/me/connections/${work.id}`, headers: bearer(user.fullKey), payload: {} }), 400);

    // Another account sees none of it.
    const stranger = await signIn();
    expect(await connections(stranger.browser)).toEqual([]);
    expectError(
      await app.inject({ method: 'DELETE', url: `/api/v1/me/connections/${work.id}`, headers: bearer(stranger.user.fullKey) }),
      404,
      'not_found',
    );

    const [row] = await app.deps.sql<{ refresh_token_encrypted: Buffer; access_token_encrypted: Buffer }[]>`
      select refresh_token_encrypted, access_token_encrypted from oauth_connections where id = ${personal.id}`;
    const key = app.deps.settings.CONNECTIONS_MASTER_KEY;
    const refresh = openSecret(key, row!.refresh_token_encrypted, oauthRefreshTokenContext(personal.id));
    const access = openSecret(key, row!.access_token_encrypted, oauthAccessTokenContext(personal.id));
    const revokedBefore = provider.revoked.length;
    const removed = expectOk<{ connection: Connection; revocation: string }>(
      await app.inject({ method: 'DELETE', url: `/api/v1/me/connections/${personal.id}`, headers: bearer(user.fullKey) }),
    );
    expect(removed.revocation).toBe('revoked');
    expect(provider.revoked.slice(revokedBefore).map((r) => r.kind)).toContain('RefreshToken');
    expect(await provider.inspect(refresh)).toBeUndefined();
    expect(await provider.inspect(access)).toBeUndefined();
    // The remaining connection became the default.
    expect(await connections(browser)).toEqual([expect.objectContaining({ id: work.id, isDefault: true })]);
    expectError(
      await app.inject({ method: 'DELETE', url: `/api/v1/me/connections/${personal.id}`, headers: bearer(user.fullKey) }),
      404,
      'not_found',
    );
  });

  it('connects server to server with the account’s own app (client credentials), never the operator’s', async () => {
    const { user } = await signIn();
    expectError(
      await app.inject({
        method: 'POST',
        url: '/api/v1/oauth/client-credentials',
        headers: bearer(user.fullKey),
        payload: { apiId, label: 'robot' },
      }),
      409,
      'oauth_not_configured',
    );
    const registered = expectOk<{ app: { provider: string; hasClientSecret: boolean }; redirectUri: string }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/oauth/apps',
        headers: bearer(user.fullKey),
        payload: {
          provider: provider.host,
          clientId: provider.clientId,
          clientSecret: provider.clientSecret,
          authorizationUrl: provider.authorizationUrl,
          tokenUrl: provider.tokenUrl,
          revocationUrl: provider.revocationUrl,
        },
      }),
      201,
    );
    expect(registered.app).toMatchObject({ provider: provider.host, hasClientSecret: true });
    expect(registered.redirectUri).toBe(`${publicUrl}/api/v1/oauth/callback`);
    const listedApps = await app.inject({ method: 'GET', url: '/api/v1/oauth/apps', headers: bearer(user.fullKey) });
    expect(listedApps.body).not.toContain(provider.clientSecret);

    const created = expectOk<{ connection: Connection }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/oauth/client-credentials',
        headers: bearer(user.fullKey),
        payload: { apiId, label: 'robot', scopes: ['read'] },
      }),
      201,
    );
    expect(created.connection).toMatchObject({ label: 'robot', grantType: 'client_credentials', isDefault: true, scopes: ['read'] });
    expect(provider.tokenRequests).toContain('client_credentials');
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/oauth/apps/${provider.host}`, headers: bearer(user.fullKey) }), 409, 'conflict');
  });

  // ---------------------------------------------------------------------------------------------
  // The proxy uses the token.

  const proxied = (key: string, path: string, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}${path}`, headers: { ...bearer(key), ...headers } });

  const sealedAccess = async (id: string) => {
    const [row] = await app.deps.sql<{ access_token_encrypted: Buffer }[]>`select access_token_encrypted from oauth_connections where id = ${id}`;
    return openSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, row!.access_token_encrypted, oauthAccessTokenContext(id));
  };

  /** Makes a connection's access token due, as time would, and tells the edges (as a change by hand would not, within the cache TTL). */
  const expire = async (accountId: string, id: string) => {
    await app.deps.sql`update oauth_connections set expires_at = now() - interval '1 minute' where id = ${id}`;
    await app.oauth.cache.changed(app.deps.redis, accountId, provider.host);
  };

  it('sends the connection token upstream, picks one by X-Service-Connection (not forwarded), and keeps the token out of answers', async () => {
    const { user, browser } = await signIn();
    const work = await connect(browser, { apiId, label: 'work' });
    await connect(browser, { apiId, label: 'personal', scopes: ['read'] });

    const res = await proxied(user.fullKey, '/things');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-service-cost']).toBe('0.002');
    let seen = provider.resourceCalls.at(-1)!;
    expect(seen).toMatchObject({ valid: true, accountId: 'alice', path: '/api/things' });
    expect(seen.token).toBe(await sealedAccess(work.id));
    expect(seen.scope!.split(' ').sort()).toEqual(['read', 'write']);

    expect((await proxied(user.fullKey, '/things', { 'x-service-connection': 'personal' })).statusCode).toBe(200);
    seen = provider.resourceCalls.at(-1)!;
    expect(seen.scope).toBe('read');
    expect(seen.headers['x-service-connection']).toBeUndefined();
    expect((await proxied(user.fullKey, '/things', { 'X-Service-Connection': work.id })).statusCode).toBe(200);
    expect(provider.resourceCalls.at(-1)!.scope!.split(' ').sort()).toEqual(['read', 'write']);
    const unknown = expectError(await proxied(user.fullKey, '/things', { 'x-service-connection': 'holiday' }), 409, 'connection_required');
    expect(unknown.hint).toContain('"work"');
    expect(unknown.hint).toContain('"personal"');

    // An upstream quoting the token back: the caller gets it redacted, in the body and the headers.
    const echo = await proxied(user.fullKey, '/echo');
    expect(echo.statusCode, echo.body).toBe(200);
    const token = provider.resourceCalls.at(-1)!.token!;
    expect(echo.body).not.toContain(token);
    expect(echo.body).toContain('[redacted]');
    expect(String(echo.headers['x-echo-token'])).not.toContain(token.slice(0, 8));
  });

  it('answers 409 connection_required naming both ways to connect when the caller has none', async () => {
    const { user } = await signIn();
    const refused = expectError(await proxied(user.fullKey, '/things'), 409, 'connection_required');
    expect(refused.hint).toContain('dashboard');
    expect(refused.hint).toContain(`POST /api/v1/connect/${apiId}/request`);
    expect(refused.hint).toContain('Nothing was charged');
  });

  it('renews an expired access token in line, once for concurrent calls; a refused renewal needs a person, and reconnecting fixes it', async () => {
    const { user, browser } = await signIn();
    const connection = await connect(browser, { apiId, label: 'renewing' });
    const first = await sealedAccess(connection.id);
    const refreshes = () => provider.tokenRequests.filter((grant) => grant === 'refresh_token').length;

    await expire(user.accountId, connection.id);
    const before = refreshes();
    const calls = await Promise.all(Array.from({ length: 5 }, () => proxied(user.fullKey, '/things')));
    expect(calls.map((c) => c.statusCode)).toEqual([200, 200, 200, 200, 200]);
    expect(refreshes() - before).toBe(1);
    const second = await sealedAccess(connection.id);
    expect(second).not.toBe(first);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ token: second, valid: true });
    const [listed] = (await connections(browser)).filter((c) => c.id === connection.id);
    expect(new Date(listed!.expiresAt!).getTime()).toBeGreaterThan(Date.now());

    // The person revokes the platform's access at the provider: the next renewal is refused.
    const [row] = await app.deps.sql<
      { refresh_token_encrypted: Buffer }[]
    >`select refresh_token_encrypted from oauth_connections where id = ${connection.id}`;
    const refresh = openSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, row!.refresh_token_encrypted, oauthRefreshTokenContext(connection.id));
    const revoked = await fetch(provider.revocationUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${provider.clientId}:${provider.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token: refresh, token_type_hint: 'refresh_token' }),
    });
    expect(revoked.status).toBe(200);
    await expire(user.accountId, connection.id);
    const reauth = expectError(await proxied(user.fullKey, '/things'), 409, 'connection_needs_reauth');
    expect(reauth.hint).toContain('invalid_grant');
    expect(reauth.hint).toContain(`POST /api/v1/connect/${apiId}/request`);
    expect((await connections(browser)).find((c) => c.id === connection.id)).toMatchObject({ status: 'needs_reauth' });
    expectError(await proxied(user.fullKey, '/things'), 409, 'connection_needs_reauth');

    const reconnected = await connect(browser, { connectionId: connection.id });
    expect(reconnected).toMatchObject({ id: connection.id, status: 'ready', label: 'renewing' });
    expect((await proxied(user.fullKey, '/things')).statusCode).toBe(200);
  });

  it('renews a client-credentials token by asking for a new one', async () => {
    const { user } = await signIn();
    expectOk(
      await app.inject({
        method: 'POST',
        url: '/api/v1/oauth/apps',
        headers: bearer(user.fullKey),
        payload: { provider: provider.host, clientId: provider.clientId, clientSecret: provider.clientSecret, issuer: provider.issuer },
      }),
      201,
    );
    const created = expectOk<{ connection: Connection }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/oauth/client-credentials',
        headers: bearer(user.fullKey),
        payload: { provider: provider.host },
      }),
      201,
    );
    expect((await proxied(user.fullKey, '/things')).statusCode).toBe(200);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ valid: true, accountId: null });
    const grants = provider.tokenRequests.filter((grant) => grant === 'client_credentials').length;
    await expire(user.accountId, created.connection.id);
    expect((await proxied(user.fullKey, '/things')).statusCode).toBe(200);
    expect(provider.tokenRequests.filter((grant) => grant === 'client_credentials').length).toBe(grants + 1);
    expect(provider.resourceCalls.at(-1)!.valid).toBe(true);
  });

  it('never logs a token, a code, a state or the client secret', () => {
    const log = logLines.join('');
    expect(log).toContain('/api/v1/oauth/callback?[redacted]');
    expect(log).not.toContain(provider.clientSecret);
    for (const call of provider.resourceCalls) if (call.token) expect(log).not.toContain(call.token);
    expect(log).not.toMatch(/[?&](code|state)=/);
  });
});
