import { createServer, type Server } from 'node:http';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { freePort, launchBrowser, screenshotOnFailure, signUpInBrowser, type RunningBrowser, BROWSER_TEST_TIMEOUT_MS } from '../helpers/browser.js';
import { MemoryOAuthClient } from '../helpers/mcp-oauth.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

/**
 * Issue 31's "done when": the official MCP TypeScript client connects to the platform with OAuth only.
 * It discovers the authorization server from the MCP endpoint's 401, registers itself (Dynamic Client
 * Registration), and sends a person's browser (Chromium) to the authorization endpoint; the person
 * signs in to the dashboard there, sees which client asks, sets its limits and approves; the client
 * gets its tokens and calls tools. The grant is then on the Keys page, and revoking it there gives
 * the client the platform's code (`key_revoked`) in the error it receives. A denial reaches the
 * client as `access_denied`.
 */
describe('an MCP client that speaks only OAuth, with consent in the dashboard', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const password = 'correct horse battery staple';
  const email = `${uniqueId('mcp-person')}@example.test`;
  let app: FastifyInstance;
  let browser: RunningBrowser;
  let page: Page;
  let base: string;
  let callbackServer: Server;
  let callback: string;
  const oauthClient = () => new MemoryOAuthClient(callback, 'Research assistant');
  let client: MemoryOAuthClient;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: uniqueId('mcp-oauth-e2e') }));
    await app.listen({ host: '127.0.0.1', port });
    // The MCP client's loopback redirect URI (RFC 8252), as a desktop client would listen on.
    const callbackPort = await freePort();
    callback = `http://127.0.0.1:${callbackPort}/callback`;
    callbackServer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>Client</title><p>You can close this window.</p>');
    });
    await new Promise<void>((resolve) => callbackServer.listen(callbackPort, '127.0.0.1', resolve));
    browser = await launchBrowser();
    page = browser.page;
    // The person's account exists; the consent happens in another browser, not yet signed in.
    await signUpInBrowser(page, base, email, password);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await new Promise((resolve) => callbackServer?.close(resolve));
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `mcp-oauth-${task.name}`));
  });

  const connect = async (provider: MemoryOAuthClient) => {
    const mcp = new Client({ name: 'research-assistant', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider }));
    return mcp;
  };

  it('discovers, registers, gets consent in the dashboard and calls a tool', async () => {
    client = oauthClient();
    await expect(connect(client)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(client.registration?.client_id).toBeTruthy();

    const person = await browser.newPerson();
    page = person.page;
    await page.goto(client.authorizationUrls.at(-1)!.toString());
    // Not signed in: the dashboard asks first, on the consent page's own address.
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/oauth/consent');
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.getByRole('heading', { name: 'Allow an MCP client' }).waitFor();
    await expect(page.getByTestId('consent-client-name').textContent()).resolves.toContain('Research assistant');
    await expect(page.getByTestId('consent-redirect-host').textContent()).resolves.toBe(new URL(callback).host);
    await expect(page.getByTestId('consent-account').textContent()).resolves.toContain(email);
    await page.getByLabel('Spending limit in dollars (empty for none)').fill('2.50');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL((url) => url.toString().startsWith(callback));
    const back = new URL(page.url());
    expect(back.searchParams.get('code')).toBeTruthy();
    expect(back.searchParams.get('iss')).toBe(`${base}/oauth2`);

    await new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: client }).finishAuth(back.searchParams);
    const mcp = await connect(client);
    const balance = (await mcp.callTool({ name: 'get_balance', arguments: {} })) as CallToolResult;
    expect(balance.isError ?? false).toBe(false);
    await mcp.close();
  });

  it('shows the grant among the keys with its limit, and revoking it there gives the client key_revoked', async () => {
    await page.goto(`${base}/keys`);
    const row = page.getByRole('list', { name: 'Agent keys' }).getByRole('listitem').filter({ hasText: 'Research assistant' });
    await row.getByText('MCP client (OAuth)').waitFor();
    await expect(row.textContent()).resolves.toContain('$2.50');
    const mcp = await connect(client);
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: 'Delete for good' }).click();
    await row.waitFor({ state: 'detached' });
    const error = await mcp.callTool({ name: 'get_balance', arguments: {} }).then(
      () => null,
      (thrown: unknown) => thrown as Error,
    );
    expect(String(error?.message)).toContain('key_revoked');
    await mcp.close().catch(() => undefined);
  });

  it('a denial reaches the client as access_denied', async () => {
    const denied = oauthClient();
    await expect(connect(denied)).rejects.toBeInstanceOf(UnauthorizedError);
    await page.goto(denied.authorizationUrls.at(-1)!.toString());
    await page.getByRole('heading', { name: 'Allow an MCP client' }).waitFor();
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.waitForURL((url) => url.toString().startsWith(callback));
    expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');
    expect(browser.pageErrors).toEqual([]);
  });
});
