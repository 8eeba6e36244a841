import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOk } from '../helpers/app.js';
import { CookieJar, MemoryOAuthClient } from '../helpers/mcp-oauth.js';
import { loginUser, registerUser, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { buildApp, edgeLogger } from '#edge/app';
import { freePort } from '../helpers/ports.js';

/**
 * The platform as the OAuth 2.1 authorization server of MCP clients (issue 31), at the edge: its
 * metadata documents, the official MCP client's whole flow (discovery, Dynamic Client Registration,
 * PKCE, consent through the dashboard's REST routes, tokens bound to /mcp) with a browser played over
 * HTTP, audience checks, refresh, revocation from the keys, and the JSON-RPC errors of refused tokens.
 */
describe('MCP clients that sign in with OAuth', () => {
  let app: FastifyInstance;
  let edge: string;
  let user: RegisteredUser;
  let session: BrowserSession;
  const callback = 'http://127.0.0.1:9/callback';
  /** Every log line the edge wrote (at debug): no token, code or verifier may be in one. */
  const logLines: string[] = [];
  /** Every secret the flows handled, checked against the log at the end. */
  const secrets: string[] = [];

  beforeAll(async () => {
    const port = await freePort();
    edge = `http://127.0.0.1:${port}`;
    const settings = testEdgeSettings({ PORT: String(port), PUBLIC_URL: edge, REDIS_PREFIX: uniqueId('mcp-oauth'), LOG_LEVEL: 'debug' });
    app = await buildApp(settings, { logger: { ...(edgeLogger(settings) as object), stream: { write: (line: string) => logLines.push(line) } } });
    await app.listen({ host: '127.0.0.1', port });
    expect((app.server.address() as AddressInfo).port).toBe(port);
    user = await registerUser(app);
    session = await loginUser(app, user);
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  /** Plays the person: the browser follows the client's authorization URL to the consent page, the person approves there, the browser goes back to the client. */
  async function consent(oauthClient: MemoryOAuthClient, limits: Record<string, unknown> = {}) {
    const jar = new CookieJar();
    const authorizationUrl = oauthClient.authorizationUrls.at(-1)!;
    const page = await jar.follow(authorizationUrl.toString(), (url) => url.pathname === '/oauth/consent', edge);
    expect(page.origin).toBe(edge);
    const uid = page.searchParams.get('interaction')!;
    const pending = expectOk<{ request: { client: { name: string; redirectHost: string; registration: string }; resource: string } }>(
      await app.inject({ method: 'GET', url: `/api/v1/oauth2/interactions/${uid}`, headers: { cookie: session.cookie } }),
    );
    const approved = expectOk<{ redirectTo: string; agentKey: { id: string; mcpClient: { name: string } } }>(
      await app.inject({ method: 'POST', url: `/api/v1/oauth2/interactions/${uid}/approve`, headers: session.writeHeaders, payload: limits }),
    );
    const back = await jar.follow(approved.redirectTo, (url) => url.toString().startsWith(callback), edge);
    secrets.push(back.searchParams.get('code') ?? '', oauthClient.verifier);
    return { pending: pending.request, agentKey: approved.agentKey, back };
  }

  async function connectWithOAuth(oauthClient: MemoryOAuthClient): Promise<Client> {
    const client = new Client({ name: 'oauth-test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: oauthClient }));
    return client;
  }

  it('serves the protected-resource metadata with its authorization server, and that server’s RFC 8414 metadata', async () => {
    const resource = await fetch(`${edge}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json());
    expect(resource).toMatchObject({ resource: `${edge}/mcp`, authorization_servers: [`${edge}/oauth2`], scopes_supported: ['mcp'] });
    for (const path of [
      '/.well-known/oauth-authorization-server/oauth2',
      '/.well-known/oauth-authorization-server',
      '/oauth2/.well-known/openid-configuration',
    ]) {
      const answer = await fetch(`${edge}${path}`);
      expect(answer.status, path).toBe(200);
      const metadata = (await answer.json()) as Record<string, unknown>;
      expect(metadata).toMatchObject({
        issuer: `${edge}/oauth2`,
        authorization_endpoint: `${edge}/oauth2/auth`,
        token_endpoint: `${edge}/oauth2/token`,
        registration_endpoint: `${edge}/oauth2/register`,
        revocation_endpoint: `${edge}/oauth2/token/revocation`,
        code_challenge_methods_supported: ['S256'],
        response_types_supported: ['code'],
        client_id_metadata_document_supported: true,
      });
      expect(metadata.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
      expect(metadata.scopes_supported).toEqual(expect.arrayContaining(['mcp']));
    }
  });

  it('takes the official MCP client through discovery, registration, consent and a tool call, with the limits chosen at consent', async () => {
    const oauthClient = new MemoryOAuthClient(callback, 'Inspector of tests');
    await expect(connectWithOAuth(oauthClient)).rejects.toBeInstanceOf(UnauthorizedError);
    // Registered by DCR; sent to the authorization endpoint with PKCE (S256) and the /mcp resource.
    expect(oauthClient.registration?.client_id).toBeTruthy();
    const authorizationUrl = oauthClient.authorizationUrls.at(-1)!;
    expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${edge}/oauth2/auth`);
    expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorizationUrl.searchParams.get('resource')).toBe(`${edge}/mcp`);

    const { pending, agentKey, back } = await consent(oauthClient, { spendLimit: '0.5', expiresAt: new Date(Date.now() + 86_400_000).toISOString() });
    expect(pending).toMatchObject({
      client: { name: 'Inspector of tests', redirectHost: '127.0.0.1:9', registration: 'dynamic' },
      resource: `${edge}/mcp`,
    });
    expect(agentKey.mcpClient.name).toBe('Inspector of tests');
    expect(back.searchParams.get('code')).toBeTruthy();

    const transport = new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: oauthClient });
    await transport.finishAuth(back.searchParams);
    expect(oauthClient.stored?.refresh_token).toBeTruthy();
    secrets.push(oauthClient.stored!.access_token, oauthClient.stored!.refresh_token!);
    const client = await connectWithOAuth(oauthClient);
    const balance = (await client.callTool({ name: 'get_balance', arguments: {} })) as CallToolResult;
    expect(balance.isError ?? false).toBe(false);
    await client.close();

    // The grant is an agent key of the account, with the consent's limits; the token is not a platform key.
    const keys = expectOk<{ agentKeys: Array<{ id: string; spendLimit: number | null; mcpClient: unknown }> }>(
      await app.inject({ method: 'GET', url: '/api/v1/agent-keys', headers: { authorization: `Bearer ${user.fullKey}` } }),
    );
    expect(keys.agentKeys.find((key) => key.id === agentKey.id)).toMatchObject({ spendLimit: 0.5, mcpClient: { name: 'Inspector of tests' } });
    const [row] = await app.deps.sql<
      { oauth_grant_id: string; expires_at: Date }[]
    >`select oauth_grant_id, expires_at from api_keys where id = ${agentKey.id}`;
    // The grant ends with its key (a day here, not the grant's year): past it nothing is refreshed.
    const [grantRow] = await app.deps.sql<
      { expires_at: Date }[]
    >`select expires_at from oauth_provider_models where kind = 'Grant' and id = ${row!.oauth_grant_id}`;
    expect(Math.abs(grantRow!.expires_at.getTime() - row!.expires_at.getTime())).toBeLessThan(5_000);
    const stored = await app.deps.sql<{ kind: string; id: string; payload: string }[]>`
      select kind, id, payload::text as payload from oauth_provider_models where grant_id = ${row!.oauth_grant_id}`;
    expect(stored.map((each) => each.kind)).toEqual(expect.arrayContaining(['AccessToken', 'RefreshToken']));
    // No token or code is stored as given: a credential's row is keyed by its SHA-256, and its payload
    // keeps no copy of it (a read of the table holds nothing usable).
    const table = JSON.stringify(await app.deps.sql`select id, payload::text from oauth_provider_models`);
    for (const token of [oauthClient.stored!.access_token, oauthClient.stored!.refresh_token!, back.searchParams.get('code')!]) {
      expect(table).not.toContain(token);
    }
    for (const each of stored.filter((model) => model.kind.endsWith('Token') || model.kind === 'AuthorizationCode'))
      expect(each.id).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('refuses tokens for another audience, unknown tokens and expired ones with a JSON-RPC error and invalid_token', async () => {
    const oauthClient = new MemoryOAuthClient(callback);
    await expect(connectWithOAuth(oauthClient)).rejects.toBeInstanceOf(UnauthorizedError);
    const { back } = await consent(oauthClient);
    await new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: oauthClient }).finishAuth(back.searchParams);
    const token = oauthClient.stored!.access_token;
    const initialize = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} };
    const post = (bearer: string) =>
      fetch(`${edge}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(initialize),
      });

    const unknown = await post('not-a-token-we-issued');
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(unknown.headers.get('www-authenticate')).toContain(`resource_metadata="${edge}/.well-known/oauth-protected-resource/mcp"`);
    expect(await unknown.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32001, data: { code: 'invalid_token' } } });

    // A token of the same grant bound to another audience (as another resource server's would be).
    const [access] = await app.deps.sql<{ id: string; payload: Record<string, unknown> }[]>`
      select id, payload from oauth_provider_models where kind = 'AccessToken' and payload->>'clientId' = ${oauthClient.registration!.client_id}`;
    await app.deps
      .sql`update oauth_provider_models set payload = payload || '{"aud":"https://elsewhere.example/api"}'::jsonb where kind = 'AccessToken' and id = ${access!.id}`;
    const elsewhere = await post(token);
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.headers.get('www-authenticate')).toContain('error="invalid_token"');
    const body = (await elsewhere.json()) as { error: { message: string; data: { code: string; hint: string } } };
    expect(body.error.data.code).toBe('invalid_token');
    expect(body.error.message).toContain('not issued for this resource');
    expect(JSON.stringify(body)).not.toContain(token);

    // Expired: the client is told to refresh (401 invalid_token), and the SDK does so on its own.
    await app.deps
      .sql`update oauth_provider_models set payload = payload || ${app.deps.sql.json({ aud: `${edge}/mcp`, exp: Math.floor(Date.now() / 1000) - 5 })} where kind = 'AccessToken' and id = ${access!.id}`;
    const expired = await post(token);
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as { error: { data: { code: string } } }).error.data.code).toBe('invalid_token');
    const client = await connectWithOAuth(oauthClient);
    expect(oauthClient.stored!.access_token).not.toBe(token);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();

    // A missing token is no invalid_token (RFC 6750 §3.1): the challenge only.
    const missing = await fetch(`${edge}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initialize),
    });
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).not.toContain('error=');
    // Authentication runs before the body is read: the id is not known yet, and JSON-RPC then says null.
    expect(await missing.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32001, data: { code: 'missing_credentials' } } });
  });

  it('refuses authorization requests for another resource and without PKCE', async () => {
    const registered = await fetch(`${edge}/oauth2/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: [callback],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        client_name: 'probe',
      }),
    });
    expect(registered.status).toBe(201);
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    // Clients that run in a browser may register (open registration takes no credential).
    const preflight = await fetch(`${edge}/oauth2/register`, {
      method: 'OPTIONS',
      headers: { origin: 'https://inspector.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    const fromBrowser = await fetch(`${edge}/oauth2/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://inspector.example' },
      body: JSON.stringify({ redirect_uris: ['https://inspector.example/cb'], token_endpoint_auth_method: 'none' }),
    });
    expect(fromBrowser.status).toBe(201);
    expect(fromBrowser.headers.get('access-control-allow-origin')).toBe('*');
    const authorize = (params: Record<string, string>) =>
      fetch(
        `${edge}/oauth2/auth?${new URLSearchParams({ client_id: clientId, redirect_uri: callback, response_type: 'code', scope: 'mcp', ...params })}`,
        {
          redirect: 'manual',
        },
      );
    const noPkce = new URL((await authorize({})).headers.get('location')!);
    expect(noPkce.searchParams.get('error')).toBe('invalid_request');
    const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
    const other = new URL(
      (await authorize({ code_challenge: challenge, code_challenge_method: 'S256', resource: 'https://elsewhere.example/api' })).headers.get(
        'location',
      )!,
    );
    expect(other.searchParams.get('error')).toBe('invalid_target');
    // A Client ID Metadata Document is fetched only from a public address: one on loopback is refused before any fetch.
    const cimd = await fetch(
      `${edge}/oauth2/auth?${new URLSearchParams({ client_id: 'https://127.0.0.1:9/client.json', redirect_uri: callback, response_type: 'code', scope: 'mcp', code_challenge: challenge, code_challenge_method: 'S256' })}`,
      { redirect: 'manual' },
    );
    expect(cimd.status).toBe(400);
    const refusal = await cimd.text();
    expect(refusal).toContain('invalid_client');
    expect(refusal).toContain('fetch not allowed');
  });

  it('revoking the grant’s key on the keys page ends the client’s access, and the SDK client sees the platform’s code', async () => {
    const oauthClient = new MemoryOAuthClient(callback, 'Soon revoked');
    await expect(connectWithOAuth(oauthClient)).rejects.toBeInstanceOf(UnauthorizedError);
    const { agentKey, back } = await consent(oauthClient);
    await new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: oauthClient }).finishAuth(back.searchParams);
    const client = await connectWithOAuth(oauthClient);
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/agent-keys/${agentKey.id}`, headers: session.writeHeaders }));
    const error = await client.callTool({ name: 'get_balance', arguments: {} }).then(
      () => null,
      (thrown: unknown) => thrown as Error,
    );
    expect(error).not.toBeNull();
    expect(String(error?.message)).toContain('key_revoked');
    await client.close().catch(() => undefined);
    // The refresh token died with the grant.
    const refreshed = await fetch(`${edge}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: oauthClient.stored!.refresh_token!,
        client_id: oauthClient.registration!.client_id,
      }),
    });
    expect(refreshed.status).toBe(400);
    expect(((await refreshed.json()) as { error: string }).error).toBe('invalid_grant');
  });

  it('answers a request once: two approvals at the same time make one key, the other is told it was answered', async () => {
    const oauthClient = new MemoryOAuthClient(callback, 'Double click');
    await expect(connectWithOAuth(oauthClient)).rejects.toBeInstanceOf(UnauthorizedError);
    const page = await new CookieJar().follow(oauthClient.authorizationUrls.at(-1)!.toString(), (url) => url.pathname === '/oauth/consent', edge);
    const uid = page.searchParams.get('interaction')!;
    const answers = await Promise.all(
      [0, 1].map(() => app.inject({ method: 'POST', url: `/api/v1/oauth2/interactions/${uid}/approve`, headers: session.writeHeaders, payload: {} })),
    );
    expect(answers.map((answer) => answer.statusCode).sort()).toEqual([200, 404]);
    const [keys] = await app.deps.sql<{ n: number }[]>`
      select count(*)::int as n from api_keys where oauth_client_id = ${oauthClient.registration!.client_id}`;
    expect(keys!.n).toBe(1);
  });

  it('keeps API keys working as bearer tokens on /mcp, and consent needs the dashboard session', async () => {
    const client = new Client({ name: 'key-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => user.fullKey } }));
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
    const refused = await app.inject({
      method: 'GET',
      url: '/api/v1/oauth2/interactions/whatever',
      headers: { authorization: `Bearer ${user.fullKey}` },
    });
    expect(refused.statusCode).toBe(403);
    const gone = await app.inject({ method: 'GET', url: '/api/v1/oauth2/interactions/whatever', headers: { cookie: session.cookie } });
    expect(gone.statusCode).toBe(404);
  });

  // Last: what the flows above handled never reached a log line.
  it('writes no token, code or PKCE verifier to the log', () => {
    expect(secrets.filter(Boolean).length).toBeGreaterThan(4);
    expect(logLines.length).toBeGreaterThan(10);
    const log = logLines.join('');
    for (const secret of secrets.filter(Boolean)) expect(log).not.toContain(secret);
  });
});
