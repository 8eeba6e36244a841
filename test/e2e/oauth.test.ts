import type { FastifyInstance } from 'fastify';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { runApiCli } from '#cli/api-cli';
import { freePort, launchBrowser, screenshotOnFailure, signUpInBrowser, type RunningBrowser, BROWSER_TEST_TIMEOUT_MS } from '../helpers/browser.js';
import { edgeClient, expectStatus } from '../helpers/edge-client.js';
import { startTestOAuthProvider, TEST_USER, type TestOAuthProvider, registerOperatorOAuthApp } from '../helpers/oidc-provider.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { registerApi } from '../helpers/upstream.js';

/**
 * Managed OAuth in a real browser: a person connects an OAuth API from the dashboard, signs in and
 * consents at a real authorization server (`oidc-provider` on loopback), comes back to a ready
 * connection, and an agent's proxied call carries a token that server accepts; an expired token is
 * renewed and the call still works; a connection the provider stopped honouring shows as needing a
 * reconnect, and reconnecting in the browser fixes it. Steps share one page and run in order.
 */
describe('OAuth connections in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  let app: FastifyInstance;
  let provider: TestOAuthProvider;
  let browser: RunningBrowser;
  let page: Page;
  let base: string;
  let apiId: string;
  let key = '';
  const call = edgeClient(() => base);

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    provider = await startTestOAuthProvider({ redirectUris: [`${base}/api/v1/oauth/callback`] });
    const env = { ...process.env, DATABASE_URL: testDatabaseUrl() };
    await registerOperatorOAuthApp(provider, env);
    apiId = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', byokPrice: '0.002', auth: 'oauth2' });
    await runApiCli(['update', '--id', apiId, '--oauth-authorization-url', provider.authorizationUrl, '--oauth-token-url', provider.tokenUrl], env);
    app = await buildApp(
      testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: uniqueId('oauth-e2e'), ALLOW_PRIVATE_UPSTREAMS: 'true' }),
    );
    // The CLI's description keeps its flows; only the scopes (with their descriptions) are replaced.
    await app.deps.sql`
      update apis set oauth = oauth || ${app.deps.sql.json({ scopes: { read: 'Read your things', write: 'Change your things' } })},
                      endpoints = ${app.deps.sql.json([{ method: 'GET', path: '/things', summary: 'List things', scopes: ['read'] }])}
       where id = ${apiId}`;
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await provider?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `oauth-${task.name}`));
  });

  /**
   * Plays the person at the provider: signs in and allows when asked, until the browser is back on the
   * Connections page with `expected` as the outcome (a provider that remembers the person and the
   * grant sends the browser straight back).
   */
  const atProvider = async (expected: 'connected' | 'reconnected') => {
    const back = (url: URL) => url.origin === base && url.pathname === '/connections' && url.searchParams.get('oauth') === expected;
    const signIn = page.getByRole('button', { name: 'Sign in' });
    const allow = page.getByRole('button', { name: 'Allow' });
    // The waits that lose a race time out later: their rejections are dropped.
    const quiet = (wait: Promise<unknown>) => wait.catch(() => undefined);
    await Promise.race([quiet(signIn.waitFor()), quiet(allow.waitFor()), quiet(page.waitForURL(back))]);
    if (await signIn.isVisible()) {
      await page.getByLabel('Login').fill(TEST_USER.login);
      await page.getByLabel('Password').fill(TEST_USER.password);
      await signIn.click();
      await Promise.race([quiet(allow.waitFor()), quiet(page.waitForURL(back))]);
    }
    if (await allow.isVisible()) await allow.click();
    await page.waitForURL(back);
  };

  const connectionItem = () => page.getByRole('list', { name: 'OAuth connections' }).getByRole('listitem');

  it('connects from the dashboard through login and consent at the provider, and a proxied call carries the token', async () => {
    key = await signUpInBrowser(page, base, `${uniqueId('oauth-person')}@example.test`, 'correct horse battery staple');
    // Before connecting, an agent's call says how to get connected.
    const refused = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(refused, 409);
    expect(refused.body.code).toBe('connection_required');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Connections', exact: true }).click();
    await page.getByText('No OAuth connections yet').waitFor();
    await page.getByLabel('API id or provider').fill(apiId);
    await page.getByLabel('Label (optional)').fill('work');
    await page.getByRole('button', { name: 'Connect with OAuth' }).click();
    await atProvider('connected');
    await page.getByText('Connected.').waitFor();
    await connectionItem().filter({ hasText: 'work' }).getByText('Ready').waitFor();
    await expect(connectionItem().filter({ hasText: 'work' }).textContent()).resolves.toContain('read');

    const proxied = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(proxied, 200);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ valid: true, accountId: TEST_USER.login, scope: 'read' });
    expect(proxied.text).not.toContain(provider.resourceCalls.at(-1)!.token!);
    expect(await page.content()).not.toContain(provider.resourceCalls.at(-1)!.token!);
  });

  it('renews an expired token, and the call still works', async () => {
    const before = provider.resourceCalls.at(-1)!.token;
    const [row] = await app.deps.sql<{ id: string; account_id: string }[]>`
      select id, account_id from oauth_connections where provider = ${provider.host} and label = 'work' order by created_at desc limit 1`;
    await app.deps.sql`update oauth_connections set expires_at = now() - interval '1 minute' where id = ${row!.id}`;
    await app.oauth.cache.changed(app.deps.redis, row!.account_id, provider.host);
    const proxied = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(proxied, 200);
    expect(provider.tokenRequests).toContain('refresh_token');
    expect(provider.resourceCalls.at(-1)).toMatchObject({ valid: true });
    expect(provider.resourceCalls.at(-1)!.token).not.toBe(before);
  });

  it('shows a connection the provider stopped honouring as needing a reconnect, and reconnecting fixes it', async () => {
    const [row] = await app.deps.sql<{ id: string; account_id: string }[]>`
      select id, account_id from oauth_connections where provider = ${provider.host} and label = 'work' order by created_at desc limit 1`;
    await app.deps
      .sql`update oauth_connections set status = 'needs_reauth', status_reason = 'The provider refused to renew the access (invalid_grant)' where id = ${row!.id}`;
    await app.oauth.cache.changed(app.deps.redis, row!.account_id, provider.host);
    const refused = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(refused, 409);
    expect(refused.body.code).toBe('connection_needs_reauth');

    await page.reload();
    const item = connectionItem().filter({ hasText: 'work' });
    await item.getByText('Needs reconnecting').waitFor();
    await item.getByRole('button', { name: 'Reconnect' }).click();
    await atProvider('reconnected');
    await page.getByText('Reconnected.').waitFor();
    await connectionItem().filter({ hasText: 'work' }).getByText('Ready').waitFor();
    expectStatus(await call(`/api/v1/proxy/${apiId}/things`, { key }), 200);
  });

  it('disconnects, revoking the tokens at the provider', async () => {
    const revoked = provider.revoked.length;
    const item = connectionItem().filter({ hasText: 'work' });
    await item.getByRole('button', { name: 'Disconnect' }).click();
    await item.getByRole('button', { name: 'Yes, disconnect' }).click();
    await page.getByText('the provider revoked its access').waitFor();
    expect(provider.revoked.length).toBeGreaterThan(revoked);
    await page.getByText('No OAuth connections yet').waitFor();
    expectStatus(await call(`/api/v1/proxy/${apiId}/things`, { key }), 409);
  });
});
