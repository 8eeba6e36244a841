import type { IncomingHttpHeaders } from 'node:http';
import { QueueEvents, Worker, type Queue } from 'bullmq';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runApiCli } from '#cli/api-cli';
import { oauthAccessTokenContext, oauthRefreshTokenContext, oauthRenewalJob, type RenewalTally } from '#core/oauth';
import { createQueue, createRedis, openSecret } from '#core/platform';
import { oauthRenewalProcessor } from '#workers/queues/oauth-renewal';
import { loadWorkerSettings } from '#workers/settings';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { startTestOAuthProvider, type TestOAuthProvider, registerOperatorOAuthApp } from '../helpers/oidc-provider.js';
import { freePort } from '../helpers/ports.js';
import { loginUser, registerUser, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startWebhookWorker } from '../helpers/webhooks.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface ConnectionRow {
  status: string;
  status_reason: string | null;
  refresh_failures: number;
  refresh_retry_at: Date | null;
  refreshed_at: Date;
  expires_at: Date | null;
}

const cliEnv = () => ({ ...process.env, DATABASE_URL: testDatabaseUrl() });

/**
 * Renewing OAuth tokens (issue 30 §2 "Refresh"): the renewal job ahead of expiry and for idle refresh
 * tokens, transient provider failures backed off, refusals marking needs_reauth with a webhook and an
 * e-mail once, recovery on reconnect, single-flight across two edges, and the upstream 401 renewed
 * and retried once with one charge. Against the loopback oidc-provider (real), real queues, a real
 * SMTP catcher and a real webhook receiver.
 */
describe('OAuth token renewal', () => {
  const redisPrefix = uniqueId('oauthrenew');
  let app: FastifyInstance;
  let provider: TestOAuthProvider;
  let publicUrl: string;
  let apiId: string;
  let redis: Redis;
  let mail: MailServer;
  let emailWorker: Worker;
  let webhookWorker: Worker;
  let renewalWorker: Worker;
  let renewalQueue: Queue;
  let renewalEvents: QueueEvents;
  let receiver: TestUpstream;
  const received: Received[] = [];

  beforeAll(async () => {
    publicUrl = `http://127.0.0.1:${await freePort()}`;
    // Access tokens live an hour: a connection is due only when a test makes it so (as time would).
    provider = await startTestOAuthProvider({ redirectUris: [`${publicUrl}/api/v1/oauth/callback`], accessTokenTtl: 3600 });
    receiver = await startUpstream((req, res, seen) => {
      received.push({ path: req.url ?? '/', headers: req.headers, body: seen.body?.toString('utf8') ?? '' });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    mail = await startMailServer();
    app = await createTestApp({ PUBLIC_URL: publicUrl, ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: redisPrefix });
    redis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis, redisPrefix, smtpUrl: mail.url, publicUrl });
    webhookWorker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix });
    const settings = loadWorkerSettings({
      ...process.env,
      DATABASE_URL: testDatabaseUrl(),
      REDIS_PREFIX: redisPrefix,
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      PUBLIC_URL: publicUrl,
      OAUTH_RENEW_AHEAD_SECONDS: '600',
      OAUTH_RENEW_SPACING_MS: '20',
    });
    const processor = oauthRenewalProcessor({ sql: app.deps.sql, redis, settings, log: pino({ level: 'silent' }) });
    renewalWorker = new Worker(processor.job.queue, processor.process, { connection: redis, prefix: redisPrefix, concurrency: 1 });
    renewalWorker.on('error', () => {});
    renewalQueue = createQueue(oauthRenewalJob.queue, { connection: redis, prefix: redisPrefix });
    renewalEvents = new QueueEvents(oauthRenewalJob.queue, { connection: redis.duplicate(), prefix: redisPrefix });
    await renewalEvents.waitUntilReady();

    await registerOperatorOAuthApp(provider, cliEnv());
    apiId = await registerApi({ baseUrl: provider.resourceUrl, price: '0.01', byokPrice: '0.002', auth: 'oauth2' });
    await runApiCli(
      ['update', '--id', apiId, '--oauth-authorization-url', provider.authorizationUrl, '--oauth-token-url', provider.tokenUrl],
      cliEnv(),
    );
    await app.deps.sql`
      update apis set oauth = ${app.deps.sql.json({
        flows: { authorizationCode: { authorizationUrl: provider.authorizationUrl, tokenUrl: provider.tokenUrl } },
        scopes: { read: 'Read your things', write: 'Change your things' },
      })}
      where id = ${apiId}`;
  }, 60_000);
  afterAll(async () => {
    await renewalWorker?.close();
    await renewalEvents?.close();
    await renewalQueue?.close();
    await emailWorker?.close();
    await webhookWorker?.close();
    await app?.close();
    await redis?.quit();
    await provider?.close();
    await receiver?.close();
    await mail?.close();
  });

  // ---------------------------------------------------------------------------------------------
  // Helpers: a person connecting, the job, the provider's view.

  const signIn = async (): Promise<{ user: RegisteredUser; browser: BrowserSession }> => {
    const user = await registerUser(app);
    return { user, browser: await loginUser(app, user) };
  };

  const landedAt = (res: LightMyRequestResponse) => {
    expect(res.statusCode, res.body).toBe(303);
    return new URL(String(res.headers.location));
  };

  /** The whole consent flow for a signed-in person (a new connection, or `connectionId` reconnected). Returns the connection's id. */
  const connect = async (browser: BrowserSession, body: Record<string, unknown>): Promise<string> => {
    const started = expectOk<{ authorizationUrl: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/oauth/authorize', headers: browser.writeHeaders, payload: body }),
    );
    const back = await provider.authorize(started.authorizationUrl);
    const landed = landedAt(
      await app.inject({ method: 'GET', url: `${back.pathname}${back.search}`, headers: { cookie: browser.cookie, 'sec-fetch-site': 'cross-site' } }),
    );
    expect(landed.searchParams.get('oauth'), landed.href).toMatch(/^(re)?connected$/);
    return landed.searchParams.get('connection')!;
  };

  const row = async (id: string) =>
    (
      await app.deps.sql<ConnectionRow[]>`
        select status, status_reason, refresh_failures, refresh_retry_at, refreshed_at, expires_at from oauth_connections where id = ${id}`
    )[0]!;

  const tokens = async (id: string) => {
    const [sealed] = await app.deps.sql<{ access_token_encrypted: Buffer; refresh_token_encrypted: Buffer }[]>`
      select access_token_encrypted, refresh_token_encrypted from oauth_connections where id = ${id}`;
    const key = app.deps.settings.CONNECTIONS_MASTER_KEY;
    return {
      access: openSecret(key, sealed!.access_token_encrypted, oauthAccessTokenContext(id)),
      refresh: openSecret(key, sealed!.refresh_token_encrypted, oauthRefreshTokenContext(id)),
    };
  };

  /** Changes a connection's row as time would, and tells the edges (a change by hand is otherwise seen within the cache TTL). */
  const age = async (accountId: string, id: string, change: { expiresIn?: string; renewedAgo?: string }) => {
    if (change.expiresIn) await app.deps.sql`update oauth_connections set expires_at = now() + ${change.expiresIn}::interval where id = ${id}`;
    if (change.renewedAgo) await app.deps.sql`update oauth_connections set refreshed_at = now() - ${change.renewedAgo}::interval where id = ${id}`;
    await app.oauth.cache.changed(app.deps.redis, accountId, provider.host);
  };

  const runJob = async (): Promise<RenewalTally> => {
    const job = await renewalQueue.add(oauthRenewalJob.name, {}, oauthRenewalJob.options);
    return (await job.waitUntilFinished(renewalEvents, 30_000)) as RenewalTally;
  };

  const refreshes = () => provider.tokenRequests.filter((grant) => grant === 'refresh_token').length;

  /** The person revokes the platform's access at the provider (RFC 7009, as its account page would). */
  const revokeAtProvider = async (refreshToken: string) => {
    const res = await fetch(provider.revocationUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${provider.clientId}:${provider.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }),
    });
    expect(res.status).toBe(200);
  };

  /**
   * The provider stops honouring one access token still in date by its expiry (as providers do after
   * a password change or past a server-side limit), while the refresh token stays good.
   */
  const dropAccessToken = async (token: string) => {
    const found = await provider.inspect(token);
    expect(found?.kind).toBe('AccessToken');
    await found!.destroy();
    expect(await provider.inspect(token)).toBeUndefined();
  };

  const proxied = (key: string, path: string, init: { method?: 'GET' | 'POST'; payload?: string } = {}) =>
    app.inject({
      method: init.method ?? 'GET',
      url: `/api/v1/proxy/${apiId}${path}`,
      headers: { ...bearer(key), ...(init.payload !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(init.payload !== undefined ? { payload: init.payload } : {}),
    });

  const registerEndpoint = async (user: RegisteredUser, path: string) =>
    expectOk<{ webhook: { id: string }; secret: string }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: bearer(user.fullKey),
        payload: { url: `${receiver.url}${path}`, eventTypes: ['connection.refresh_failed', 'connection.recovered'] },
      }),
      201,
    );

  /** The deliveries that reached `path`, verified with the endpoint's secret (Standard Webhooks). */
  const deliveredTo = (path: string, secret: string) =>
    received
      .filter((r) => r.path === path)
      .map((r) => ({
        raw: r.body,
        event: new Webhook(secret).verify(r.body, {
          'webhook-id': String(r.headers['webhook-id']),
          'webhook-timestamp': String(r.headers['webhook-timestamp']),
          'webhook-signature': String(r.headers['webhook-signature']),
        }) as { type: string; data: Record<string, unknown> },
      }));

  const ledger = (accountId: string) =>
    app.deps.sql<{ kind: string; amount_micros: bigint }[]>`
      select kind, amount_micros from ledger_entries where account_id = ${accountId} and kind in ('charge', 'refund') order by seq`;

  /** The usage events the edge handed over for an account (usage is aggregated by a worker this file does not run). */
  const usageEvents = async (accountId: string) => {
    await app.usage.flush();
    const jobs = await app.usage.queue.getJobs(['waiting', 'active', 'completed', 'delayed']);
    return jobs
      .flatMap((job) => (job.data as { events: Array<{ accountId: string; status: number; costMicros: string }> }).events)
      .filter((e) => e.accountId === accountId);
  };

  // ---------------------------------------------------------------------------------------------

  it('renews a token that expires within its window, ahead of any call; the provider takes the new one', async () => {
    const { user, browser } = await signIn();
    const id = await connect(browser, { apiId, label: 'ahead' });
    const first = await tokens(id);
    await age(user.accountId, id, { expiresIn: '5 minutes' });
    const before = refreshes();

    const tally = await runJob();
    expect(tally).toMatchObject({ examined: 1, renewed: 1, needs_reauth: 0, unreachable: 0 });
    expect(refreshes() - before).toBe(1);
    const second = await tokens(id);
    expect(second.access).not.toBe(first.access);
    expect((await provider.inspect(second.access))?.accountId).toBe('alice');
    const after = await row(id);
    expect(after).toMatchObject({ status: 'ready', refresh_failures: 0, refresh_retry_at: null });
    expect(after.expires_at!.getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);

    // The edges were told: the next call carries the new token at once, with no renewal of its own.
    const res = await proxied(user.fullKey, '/things');
    expect(res.statusCode, res.body).toBe(200);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ token: second.access, valid: true });
    expect(refreshes() - before).toBe(1);
    // Nothing is due any more.
    expect(await runJob()).toMatchObject({ examined: 0 });
  });

  it('renews a refresh token left unused for a day, whatever its access token’s expiry', async () => {
    const { user, browser } = await signIn();
    const id = await connect(browser, { apiId, label: 'idle' });
    const first = await tokens(id);
    await age(user.accountId, id, { renewedAgo: '25 hours' });
    const before = refreshes();
    expect(await runJob()).toMatchObject({ examined: 1, renewed: 1 });
    expect(refreshes() - before).toBe(1);
    expect((await tokens(id)).access).not.toBe(first.access);
    expect((await row(id)).refreshed_at.getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it('backs off a provider that cannot answer (5xx, refused connection) without needing a person, and renews once it answers', async () => {
    const { user, browser } = await signIn();
    const id = await connect(browser, { apiId, label: 'flaky' });
    const first = await tokens(id);
    // The provider's token endpoint is down: a 503 with an OAuth error body, then nothing listening at all.
    let failingCalls = 0;
    const failing = await startUpstream((_req, res) => {
      failingCalls += 1;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'temporarily_unavailable' }));
    });
    const pointTokenUrlAt = (url: string) =>
      app.deps.sql`update oauth_apps set token_url = ${url}, updated_at = now() where provider = ${provider.host} and account_id is null`;
    try {
      await pointTokenUrlAt(`${failing.url}/token`);
      await age(user.accountId, id, { expiresIn: '5 minutes' });
      expect(await runJob()).toMatchObject({ examined: 1, unreachable: 1, needs_reauth: 0 });
      expect(failingCalls).toBe(1);
      let now = await row(id);
      expect(now).toMatchObject({ status: 'ready', status_reason: null, refresh_failures: 1 });
      // The first wait is 30-60 s (a minute, jittered); the next run leaves the connection alone.
      const wait = now.refresh_retry_at!.getTime() - Date.now();
      expect(wait).toBeGreaterThan(25_000);
      expect(wait).toBeLessThanOrEqual(60_000);
      expect(await runJob()).toMatchObject({ examined: 0 });
      expect(failingCalls).toBe(1);

      // Still down, now refusing connections: another failure in a row, a longer wait.
      await pointTokenUrlAt(`http://127.0.0.1:${await freePort()}/token`);
      await app.deps.sql`update oauth_connections set refresh_retry_at = now() - interval '1 second' where id = ${id}`;
      expect(await runJob()).toMatchObject({ examined: 1, unreachable: 1 });
      now = await row(id);
      expect(now).toMatchObject({ status: 'ready', refresh_failures: 2 });
      expect(now.refresh_retry_at!.getTime() - Date.now()).toBeGreaterThan(55_000);
      // Calls meanwhile still work with the token in date.
      expect((await proxied(user.fullKey, '/things')).statusCode).toBe(200);

      // Back up: renewed, the failures forgotten.
      await pointTokenUrlAt(provider.tokenUrl);
      await app.deps.sql`update oauth_connections set refresh_retry_at = now() - interval '1 second' where id = ${id}`;
      expect(await runJob()).toMatchObject({ examined: 1, renewed: 1 });
      expect(await row(id)).toMatchObject({ status: 'ready', refresh_failures: 0, refresh_retry_at: null });
      expect((await tokens(id)).access).not.toBe(first.access);
    } finally {
      await pointTokenUrlAt(provider.tokenUrl);
      await failing.close();
    }
  });

  it('a refresh token revoked at the provider: needs_reauth, one signed webhook and one e-mail however many renew at once; reconnecting recovers it', async () => {
    const { user, browser } = await signIn();
    const { secret } = await registerEndpoint(user, '/refresh-failed');
    const id = await connect(browser, { apiId, label: 'revoked' });
    const granted = await tokens(id);
    await revokeAtProvider(granted.refresh);
    await age(user.accountId, id, { expiresIn: '5 minutes' });

    // The job, a call's renewal on this edge and a forced one race for the same connection.
    const settled = await Promise.allSettled([
      runJob(),
      app.oauth.tokens.renew(id, { expiringWithinMs: 600_000 }),
      app.oauth.tokens.renew(id, { forceUnlessRenewedSince: new Date() }),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    const marked = await row(id);
    expect(marked).toMatchObject({ status: 'needs_reauth', refresh_failures: 1 });
    expect(marked.status_reason).toContain('invalid_grant');
    // Later runs and calls change nothing and tell no one again.
    expect(await runJob()).toMatchObject({ examined: 0 });
    const refused = expectError(await proxied(user.fullKey, '/things'), 409, 'connection_needs_reauth');
    expect(refused.hint).toContain('invalid_grant');

    const [delivery] = await eventually(
      'the connection.refresh_failed delivery',
      () => {
        const found = deliveredTo('/refresh-failed', secret);
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(delivery!.event).toMatchObject({
      type: 'connection.refresh_failed',
      data: {
        connectionId: id,
        provider: provider.host,
        label: 'revoked',
        status: 'needs_reauth',
        reconnectUrl: `${publicUrl}/connections?reconnect=${id}`,
      },
    });
    expect(String(delivery!.event.data.reason)).toContain('invalid_grant');
    for (const token of [granted.access, granted.refresh]) expect(delivery!.raw).not.toContain(token);

    const email = await mail.waitFor((m) => recipientOf(m).includes(user.email) && /Reconnect/.test(m.subject ?? ''));
    expect(email.subject).toBe(`Reconnect ${provider.host}: your connection "revoked" stopped working`);
    expect(email.text).toContain(`${publicUrl}/connections?reconnect=${id}`);
    expect(email.text).toContain('invalid_grant');
    expect(email.text).not.toContain(granted.refresh);

    // The person follows the link and reconnects: ready again, and connection.recovered once.
    await connect(browser, { connectionId: id });
    expect(await row(id)).toMatchObject({ status: 'ready', refresh_failures: 0, status_reason: null });
    expect((await proxied(user.fullKey, '/things')).statusCode).toBe(200);
    const recovered = await eventually(
      'the connection.recovered delivery',
      () => {
        const found = deliveredTo('/refresh-failed', secret).filter((d) => d.event.type === 'connection.recovered');
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(recovered[0]!.event.data).toEqual({ connectionId: id, provider: provider.host, label: 'revoked', status: 'ready' });

    // Once each, even after the queues had time to repeat themselves.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(deliveredTo('/refresh-failed', secret).map((d) => d.event.type)).toEqual(['connection.refresh_failed', 'connection.recovered']);
    expect(mail.messages.filter((m) => recipientOf(m).includes(user.email))).toHaveLength(1);
  });

  it('renews once for calls on two edges and the job at the same time: the provider’s token endpoint is asked once', async () => {
    const second = await createTestApp({ PUBLIC_URL: publicUrl, ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: redisPrefix });
    try {
      const { user, browser } = await signIn();
      const id = await connect(browser, { apiId, label: 'two-edges' });
      const first = await tokens(id);
      // Due for both the job (within its window) and the calls (expired already).
      await age(user.accountId, id, { expiresIn: '-1 minute' });
      const before = refreshes();
      const call = (edge: FastifyInstance) => edge.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/things`, headers: bearer(user.fullKey) });
      const [job, ...calls] = await Promise.all([runJob(), call(app), call(second), call(app), call(second), call(app), call(second)]);
      expect(calls.map((c) => c.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(refreshes() - before).toBe(1);
      const renewed = await tokens(id);
      expect(renewed.access).not.toBe(first.access);
      expect(provider.resourceCalls.slice(-6).every((c) => c.token === renewed.access && c.valid)).toBe(true);
      expect((job as RenewalTally).needs_reauth).toBe(0);
    } finally {
      await second.close();
    }
  });

  it('an upstream 401 renews the token once and retries the call once: one charge, one usage event', async () => {
    const { user, browser } = await signIn();
    const id = await connect(browser, { apiId, label: 'refused' });
    const stale = await tokens(id);
    // The provider stopped honouring the access token, older than the half minute under which a 401 renews nothing.
    await dropAccessToken(stale.access);
    expect(await provider.inspect(stale.refresh)).toBeDefined();
    await age(user.accountId, id, { renewedAgo: '2 minutes' });
    const before = refreshes();
    const callsBefore = provider.resourceCalls.length;

    const res = await proxied(user.fullKey, '/things');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-service-cost']).toBe('0.002');
    expect(refreshes() - before).toBe(1);
    const renewed = await tokens(id);
    expect(provider.resourceCalls.slice(callsBefore).map((c) => ({ token: c.token, valid: c.valid }))).toEqual([
      { token: stale.access, valid: false },
      { token: renewed.access, valid: true },
    ]);
    expect((await ledger(user.accountId)).map((e) => [e.kind, e.amount_micros])).toEqual([['charge', -2_000n]]);
    await expect
      .poll(async () => (await usageEvents(user.accountId)).map((e) => [e.status, e.costMicros]), { timeout: 5_000, interval: 100 })
      .toEqual([[200, '2000']]);
  });

  it('concurrent 401s with the same token renew once; a streamed body is not sent twice, and its 401 leaves a renewed token for the next call', async () => {
    const { user, browser } = await signIn();
    const id = await connect(browser, { apiId, label: 'racing' });
    let stale = await tokens(id);
    await dropAccessToken(stale.access);
    await age(user.accountId, id, { renewedAgo: '2 minutes' });
    let before = refreshes();
    const calls = await Promise.all(Array.from({ length: 4 }, () => proxied(user.fullKey, '/things')));
    expect(calls.map((c) => c.statusCode)).toEqual([200, 200, 200, 200]);
    expect(refreshes() - before).toBe(1);
    expect((await ledger(user.accountId)).filter((e) => e.kind === 'charge')).toHaveLength(4);

    // A POST whose body streams through the proxy: the 401 is the caller's (charged like any 4xx, once), the token is renewed meanwhile.
    stale = await tokens(id);
    await dropAccessToken(stale.access);
    await age(user.accountId, id, { renewedAgo: '2 minutes' });
    before = refreshes();
    const callsBefore = provider.resourceCalls.length;
    const posted = await proxied(user.fullKey, '/things', { method: 'POST', payload: JSON.stringify({ name: 'a thing' }) });
    expect(posted.statusCode, posted.body).toBe(401);
    expect(provider.resourceCalls.slice(callsBefore)).toHaveLength(1);
    expect(refreshes() - before).toBe(1);
    const again = await proxied(user.fullKey, '/things', { method: 'POST', payload: JSON.stringify({ name: 'a thing' }) });
    expect(again.statusCode, again.body).toBe(200);
    expect(provider.resourceCalls.at(-1)).toMatchObject({ token: (await tokens(id)).access, valid: true });
    expect(refreshes() - before).toBe(1);
    expect((await ledger(user.accountId)).filter((e) => e.kind === 'charge')).toHaveLength(6);
    expect((await ledger(user.accountId)).filter((e) => e.kind === 'refund')).toHaveLength(0);

    // A token refused moments after it was issued is not renewed again (an upstream answering 401 to everything cannot make the platform hammer the provider).
    stale = await tokens(id);
    await dropAccessToken(stale.access);
    before = refreshes();
    expect((await proxied(user.fullKey, '/things')).statusCode).toBe(401);
    expect(refreshes()).toBe(before);
  });
});
