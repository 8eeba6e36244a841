import type { IncomingHttpHeaders } from 'node:http';
import { QueueEvents, Worker, type Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { runApiCli } from '#cli/api-cli';
import { oauthRefreshTokenContext, oauthRenewalJob, type RenewalTally } from '#core/oauth';
import { createQueue, createRedis, openSecret } from '#core/platform';
import { oauthRenewalProcessor } from '#workers/queues/oauth-renewal';
import { loadWorkerSettings } from '#workers/settings';
import { freePort, launchBrowser, screenshotOnFailure, signUpInBrowser, type RunningBrowser, BROWSER_TEST_TIMEOUT_MS } from '../helpers/browser.js';
import { edgeClient, expectStatus } from '../helpers/edge-client.js';
import { startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { startTestOAuthProvider, TEST_USER, type TestOAuthProvider, registerOperatorOAuthApp } from '../helpers/oidc-provider.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startWebhookWorker } from '../helpers/webhooks.js';

/**
 * Issue 30's browser flow to its end, with the renewal job of the queue workers: a person connects in
 * the dashboard through login and consent at the loopback oidc-provider; an agent's call carries the
 * token; the token comes due and the job renews it, and the call still works; the person revokes the
 * platform's access at the provider, the next renewal is refused, the dashboard shows the connection
 * as needing a reconnect and the account's webhook (signature verified) and e-mail arrive; the
 * e-mail's link reconnects it in the browser, and connection.recovered follows. Steps share one page.
 */
describe('OAuth renewal and reconnect in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const redisPrefix = uniqueId('oauth-refresh-e2e');
  let app: FastifyInstance;
  let provider: TestOAuthProvider;
  let browser: RunningBrowser;
  let page: Page;
  let base: string;
  let apiId: string;
  let key = '';
  let email = '';
  let connectionId = '';
  let secret = '';
  let redis: Redis;
  let mail: MailServer;
  let workers: Worker[] = [];
  let renewalQueue: Queue;
  let renewalEvents: QueueEvents;
  let receiver: TestUpstream;
  const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  const call = edgeClient(() => base);

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    provider = await startTestOAuthProvider({ redirectUris: [`${base}/api/v1/oauth/callback`], accessTokenTtl: 3600 });
    const env = { ...process.env, DATABASE_URL: testDatabaseUrl() };
    await registerOperatorOAuthApp(provider, env);
    apiId = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', byokPrice: '0.002', auth: 'oauth2' });
    await runApiCli(['update', '--id', apiId, '--oauth-authorization-url', provider.authorizationUrl, '--oauth-token-url', provider.tokenUrl], env);
    app = await buildApp(testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: redisPrefix, ALLOW_PRIVATE_UPSTREAMS: 'true' }));
    await app.deps.sql`
      update apis set oauth = oauth || ${app.deps.sql.json({ scopes: { read: 'Read your things', write: 'Change your things' } })},
                      endpoints = ${app.deps.sql.json([{ method: 'GET', path: '/things', summary: 'List things', scopes: ['read'] }])}
       where id = ${apiId}`;
    await app.listen({ host: '127.0.0.1', port });

    // The queue workers' side: e-mail, webhook deliveries and the renewal job, on this test's prefix.
    receiver = await startUpstream((req, res, seen) => {
      received.push({ headers: req.headers, body: seen.body?.toString('utf8') ?? '' });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    mail = await startMailServer();
    redis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const settings = loadWorkerSettings({ ...env, REDIS_PREFIX: redisPrefix, ALLOW_PRIVATE_UPSTREAMS: 'true', PUBLIC_URL: base });
    const renewal = oauthRenewalProcessor({ sql: app.deps.sql, redis, settings, log: pino({ level: 'silent' }) });
    const renewalWorker = new Worker(renewal.job.queue, renewal.process, { connection: redis, prefix: redisPrefix, concurrency: 1 });
    renewalWorker.on('error', () => {});
    workers = [
      renewalWorker,
      startEmailWorker({ sql: app.deps.sql, redis, redisPrefix, smtpUrl: mail.url, publicUrl: base }),
      startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix }),
    ];
    renewalQueue = createQueue(oauthRenewalJob.queue, { connection: redis, prefix: redisPrefix });
    renewalEvents = new QueueEvents(oauthRenewalJob.queue, { connection: redis.duplicate(), prefix: redisPrefix });
    await renewalEvents.waitUntilReady();
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all(workers.map((worker) => worker.close()));
    await renewalEvents?.close();
    await renewalQueue?.close();
    await app?.close();
    await redis?.quit();
    await provider?.close();
    await receiver?.close();
    await mail?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `oauth-refresh-${task.name}`));
  });

  /** The person at the provider: signs in and allows when asked, until the browser is back on Connections with `expected`. */
  const atProvider = async (expected: 'connected' | 'reconnected') => {
    const back = (url: URL) => url.origin === base && url.pathname === '/connections' && url.searchParams.get('oauth') === expected;
    const signIn = page.getByRole('button', { name: 'Sign in' });
    const allow = page.getByRole('button', { name: 'Allow' });
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

  const item = () => page.getByRole('list', { name: 'OAuth connections' }).getByRole('listitem').filter({ hasText: 'work' });

  const runJob = async (): Promise<RenewalTally> => {
    const job = await renewalQueue.add(oauthRenewalJob.name, {}, oauthRenewalJob.options);
    return (await job.waitUntilFinished(renewalEvents, 30_000)) as RenewalTally;
  };

  /** Brings the access token within the job's window (ten minutes), as time would. */
  const comeDue = async () => {
    await app.deps.sql`update oauth_connections set expires_at = now() + interval '5 minutes' where id = ${connectionId}`;
  };

  const events = () =>
    received.map(
      (r) =>
        new Webhook(secret).verify(r.body, {
          'webhook-id': String(r.headers['webhook-id']),
          'webhook-timestamp': String(r.headers['webhook-timestamp']),
          'webhook-signature': String(r.headers['webhook-signature']),
        }) as { type: string; data: Record<string, unknown> },
    );

  it('connects from the dashboard through login and consent at the provider; a proxied call carries the token', async () => {
    email = `${uniqueId('oauth-refresh')}@example.test`;
    key = await signUpInBrowser(page, base, email, 'correct horse battery staple');
    const hook = await call('/api/v1/webhooks', {
      key,
      method: 'POST',
      body: { url: `${receiver.url}/hooks`, eventTypes: ['connection.refresh_failed', 'connection.recovered'] },
    });
    expectStatus(hook, 201);
    secret = String(hook.body.secret);

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Connections', exact: true }).click();
    await page.getByLabel('API id or provider').fill(apiId);
    await page.getByLabel('Label (optional)').fill('work');
    await page.getByRole('button', { name: 'Connect with OAuth' }).click();
    await atProvider('connected');
    await item().getByText('Ready').waitFor();
    connectionId = String(await item().getAttribute('data-connection'));

    const proxied = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(proxied, 200);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ valid: true, accountId: TEST_USER.login });
  });

  it('renews the token when it comes due, by the queue job, and the call still works with the new one', async () => {
    const before = provider.resourceCalls.at(-1)!.token;
    await comeDue();
    expect(await runJob()).toMatchObject({ examined: 1, renewed: 1 });
    const proxied = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(proxied, 200);
    const used = provider.resourceCalls.at(-1)!;
    expect(used.valid).toBe(true);
    expect(used.token).not.toBe(before);
    expect(provider.tokenRequests.filter((grant) => grant === 'refresh_token')).toHaveLength(1);
  });

  it('the refresh token revoked at the provider: needs_reauth in the dashboard, the webhook and the e-mail; the e-mail’s link reconnects it', async () => {
    // The person removes the platform's access in their account at the provider (RFC 7009 revocation).
    const [row] = await app.deps.sql<{ refresh_token_encrypted: Buffer }[]>`
      select refresh_token_encrypted from oauth_connections where id = ${connectionId}`;
    const refresh = openSecret(app.deps.settings.CONNECTIONS_MASTER_KEY, row!.refresh_token_encrypted, oauthRefreshTokenContext(connectionId));
    const revoked = await fetch(provider.revocationUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${provider.clientId}:${provider.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token: refresh, token_type_hint: 'refresh_token' }),
    });
    expect(revoked.status).toBe(200);
    await comeDue();
    expect(await runJob()).toMatchObject({ examined: 1, needs_reauth: 1 });
    const refused = await call(`/api/v1/proxy/${apiId}/things`, { key });
    expectStatus(refused, 409);
    expect(refused.body.code).toBe('connection_needs_reauth');

    await page.reload();
    await item().getByText('Needs reconnecting').waitFor();
    await item()
      .getByText(/invalid_grant/)
      .waitFor();

    const failed = await eventually('the connection.refresh_failed webhook', () => events().find((e) => e.type === 'connection.refresh_failed'), {
      timeoutMs: 15_000,
    });
    expect(failed.data).toMatchObject({
      connectionId,
      provider: provider.host,
      label: 'work',
      reconnectUrl: `${base}/connections?reconnect=${connectionId}`,
    });
    expect(JSON.stringify(received)).not.toContain(refresh);

    const message = await mail.waitFor((m) => /Reconnect/.test(m.subject ?? ''));
    const link = /https?:\/\/\S+\/connections\?reconnect=[0-9a-f-]+/.exec(message.text ?? '')?.[0];
    expect(link).toBe(`${base}/connections?reconnect=${connectionId}`);

    // The link, signed in: one button to the provider and back.
    await page.goto(link!);
    const prompt = page.getByRole('region', { name: 'Reconnect a connection' });
    await prompt.getByText(/stopped working/).waitFor();
    await prompt.getByRole('button', { name: `Reconnect ${provider.host}` }).click();
    await atProvider('reconnected');
    await page.getByText('Reconnected.').waitFor();
    await item().getByText('Ready').waitFor();
    expectStatus(await call(`/api/v1/proxy/${apiId}/things`, { key }), 200);
    const recovered = await eventually('the connection.recovered webhook', () => events().find((e) => e.type === 'connection.recovered'), {
      timeoutMs: 15_000,
    });
    expect(recovered.data).toMatchObject({ connectionId, label: 'work', status: 'ready' });
    expect(events().map((e) => e.type)).toEqual(['connection.refresh_failed', 'connection.recovered']);
  });
});
