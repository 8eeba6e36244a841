import type { FastifyInstance } from 'fastify';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runApiCli } from '#cli/api-cli';
import { buildApp } from '#edge/app';
import { freePort, launchBrowser, screenshotOnFailure, signUpInBrowser, type RunningBrowser, BROWSER_TEST_TIMEOUT_MS } from '../helpers/browser.js';
import { startTestOAuthProvider, TEST_USER, type TestOAuthProvider, registerOperatorOAuthApp } from '../helpers/oidc-provider.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { registerApi } from '../helpers/upstream.js';

/**
 * Connect requests in the dashboard's inbox, in a real browser: an agent asks (over REST), the
 * owner opens the e-mail's link, reads what and why, and connects with a key in one step, declines,
 * or, for an OAuth API, connects through sign-in and consent at a real authorization server
 * (`oidc-provider` on loopback) and lands back in the inbox while the agent's call carries the token;
 * an OAuth API whose provider has no OAuth app says so in the inbox instead of leaving it.
 */
describe('connect requests in the inbox', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  let app: FastifyInstance;
  let base: string;
  let browser: RunningBrowser;
  let page: Page;
  let accountKey = '';
  let agentKey = '';
  let keyApi: string;
  let oauthApi: string;
  let noAppApi: string;
  let noAppProvider: string;
  let provider: TestOAuthProvider;

  const rest = async (method: string, path: string, key: string, body?: object) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return {
      status: response.status,
      body: (await response.json()) as {
        request: { id: string; status: string; connectUrl: string };
        fullKey: string;
        code?: string;
        api: { callability: { state: string } };
      },
    };
  };
  const ask = async (apiId: string, purpose: string) => {
    const answer = await rest('POST', `/api/v1/connect/${apiId}/request`, agentKey, { purpose });
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    return answer.body.request;
  };

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    keyApi = await registerApi({ baseUrl: 'http://127.0.0.1:9', price: '0.001', auth: 'header:X-Upstream-Key' });
    // An OAuth API served by the loopback provider's resource server, whose OAuth app the operator registered.
    provider = await startTestOAuthProvider({ redirectUris: [`${base}/api/v1/oauth/callback`] });
    const env = { ...process.env, DATABASE_URL: testDatabaseUrl() };
    await registerOperatorOAuthApp(provider, env);
    oauthApi = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', byokPrice: '0.002', auth: 'oauth2' });
    await runApiCli(
      [
        'update',
        '--id',
        oauthApi,
        '--oauth-authorization-url',
        provider.authorizationUrl,
        '--oauth-token-url',
        provider.tokenUrl,
        '--oauth-scopes',
        'read',
      ],
      env,
    );
    // An OAuth API of a provider nobody registered an app for.
    noAppProvider = `login.${uniqueId('noapp')}.com`;
    noAppApi = await registerApi({ baseUrl: 'http://127.0.0.1:9', price: '0.001', auth: 'oauth2' });
    await runApiCli(
      [
        'update',
        '--id',
        noAppApi,
        '--oauth-authorization-url',
        `https://${noAppProvider}/authorize`,
        '--oauth-token-url',
        `https://${noAppProvider}/token`,
      ],
      env,
    );
    app = await buildApp(
      testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: uniqueId('creqe2e'), ALLOW_PRIVATE_UPSTREAMS: 'true' }),
    );
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
    accountKey = await signUpInBrowser(page, base, `${uniqueId('person')}@example.test`, 'correct horse battery staple');
    const made = await rest('POST', '/api/v1/agent-keys', accountKey, { name: 'inbox agent' });
    agentKey = made.body.fullKey;
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await provider?.close();
    await runApiCli(['oauth-app', 'remove', '--provider', provider.host], { ...process.env, DATABASE_URL: testDatabaseUrl() }).catch(() => undefined);
  });
  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `connect-requests-${task.name}`));
  });

  it('opens at the linked request, shows what and why, and connects a key in one step', async () => {
    const request = await ask(keyApi, 'Text the on-call phone when the nightly backup fails.\nOnly that.');
    await page.goto(request.connectUrl);
    const card = page.getByTestId('connect-request').filter({ hasText: `Connect Test ${keyApi}` });
    await card.waitFor();
    await card.getByText('Text the on-call phone when the nightly backup fails.').waitFor();
    expect(await card.textContent()).toContain('API key');
    await card.getByLabel(`Your key for Test ${keyApi}`).fill('their-own-key-123456');
    await card.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByText(`Test ${keyApi} is connected. The agent can call it now.`).waitFor();
    const polled = await rest('GET', `/api/v1/connect/requests/${request.id}`, agentKey);
    expect(polled.body.request.status).toBe('connected');
    // The list is read again after the answer: the card goes.
    await expect
      .poll(() =>
        page
          .getByTestId('connect-request')
          .filter({ hasText: `Connect Test ${keyApi}` })
          .count(),
      )
      .toBe(0);
    // The link of an answered request says so.
    await page.goto(request.connectUrl);
    await page.getByText('is no longer waiting: it is connected').waitFor();
  });

  it('declines, and the agent sees the request declined', async () => {
    const request = await ask(keyApi, 'Send a second copy of the report by text message.');
    await page.goto(`${base}/inbox`);
    const card = page.getByTestId('connect-request').filter({ hasText: 'Send a second copy' });
    await card.getByRole('button', { name: 'Decline' }).click();
    await page.getByText(`You declined to connect Test ${keyApi}.`).waitFor();
    expect((await rest('GET', `/api/v1/connect/requests/${request.id}`, agentKey)).body.request.status).toBe('declined');
  });

  it("connects an OAuth API's request through sign-in and consent at the provider, and the agent's call carries the token", async () => {
    const before = await rest('GET', `/api/v1/apis/${oauthApi}`, agentKey);
    expect(before.body.api.callability.state).toBe('needs_oauth');
    const refused = await rest('GET', `/api/v1/proxy/${oauthApi}/things`, agentKey);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('connection_required');

    const request = await ask(oauthApi, 'Read the shared calendar to find a free slot for the review.');
    // The agent waits for the answer while the person acts (a long poll).
    const waited = rest('GET', `/api/v1/connect/requests/${request.id}?wait=60`, agentKey);
    await page.goto(request.connectUrl);
    const card = page.getByTestId('connect-request').filter({ hasText: `Connect Test ${oauthApi}` });
    await card.getByText('Read the shared calendar to find a free slot for the review.').waitFor();
    expect(await card.textContent()).toContain('OAuth sign-in');
    await card.getByRole('button', { name: `Connect with ${provider.host}` }).click();

    // At the provider: its own login and consent pages.
    await page.waitForURL((url) => url.origin === provider.issuer);
    await page.getByLabel('Login').fill(TEST_USER.login);
    await page.getByLabel('Password').fill(TEST_USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Scopes:').waitFor();
    expect(await page.locator('#scopes').textContent()).toContain('read');
    await page.getByRole('button', { name: 'Allow' }).click();

    // Back in the inbox, which says how it went; the request is answered.
    await page.waitForURL((url) => url.origin === base && url.pathname === '/inbox' && url.searchParams.get('oauth') === 'connected');
    await page.getByText('Connected. The agent that asked can call it now.').waitFor();
    // The requests are read back and none waits any more: the inbox says nothing needs the person.
    await page.getByText('Nothing needs you right now').waitFor();
    expect(await page.getByTestId('connect-request').count()).toBe(0);
    const answered = await waited;
    expect(answered.status).toBe(200);
    expect(answered.body.request.status).toBe('connected');
    expect((await rest('GET', `/api/v1/connect/requests/${request.id}`, agentKey)).body.request.status).toBe('connected');
    expect((await rest('GET', `/api/v1/apis/${oauthApi}`, agentKey)).body.api.callability.state).toBe('ready');

    // The agent's call goes through with a token the provider issued for the person, for the scope asked.
    const calls = provider.resourceCalls.length;
    const proxied = await fetch(`${base}/api/v1/proxy/${oauthApi}/things`, { headers: { authorization: `Bearer ${agentKey}` } });
    const text = await proxied.text();
    expect(proxied.status, text).toBe(200);
    expect(provider.resourceCalls.length).toBe(calls + 1);
    const seen = provider.resourceCalls.at(-1)!;
    expect(seen).toMatchObject({ valid: true, accountId: TEST_USER.login, scope: 'read' });
    expect(text).not.toContain(seen.token!);
    expect(await page.content()).not.toContain(seen.token!);
    expect(proxied.headers.get('x-service-cost')).toBe('0.002');
    expect(browser.pageErrors).toEqual([]);
  });

  it("shows why an OAuth API's request cannot be connected when its provider has no OAuth app, and stays in the inbox", async () => {
    expect((await rest('GET', `/api/v1/apis/${noAppApi}`, agentKey)).body.api.callability.state).toBe('unavailable');
    const request = await ask(noAppApi, 'Post the weekly summary to the team channel.');
    await page.goto(`${base}/inbox`);
    const card = page.getByTestId('connect-request').filter({ hasText: `Connect Test ${noAppApi}` });
    await card.getByRole('button', { name: `Connect with ${noAppProvider}` }).click();
    const alert = card.getByRole('alert');
    // In a person's words: the server's hint names a route for developers.
    await alert.getByText('This API cannot be connected with OAuth yet').waitFor();
    expect(await alert.textContent()).not.toMatch(/\/api\/|POST /);
    expect(new URL(page.url()).pathname).toBe('/inbox');
    // Nothing was answered: the request still waits for a person.
    expect((await rest('GET', `/api/v1/connect/requests/${request.id}`, agentKey)).body.request.status).toBe('pending');
    expect(browser.pageErrors).toEqual([]);
  });
});
