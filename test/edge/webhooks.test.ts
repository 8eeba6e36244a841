import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { WebhookEmitter } from '#core/notifications';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { registerUser, type RegisteredUser } from '../helpers/session.js';
import { createTestAccount } from '#fixtures/accounts';
import { uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startWebhookWorker } from '../helpers/webhooks.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * Outgoing webhooks (issue 16): endpoints registered over the API get Standard Webhooks payloads,
 * verified here with the `standardwebhooks` package by a real receiver on 127.0.0.1, delivered by
 * the webhook queue's processor on BullMQ workers this file runs (and kills).
 */
describe('outgoing webhooks', () => {
  const redisPrefix = uniqueId('whk');
  const taskQueue = uniqueId('webhooks-');
  let app: FastifyInstance;
  let redis: Redis;
  let worker: Worker;
  let temporalWorker: RunningWorker;
  let mail: MailServer;
  let emailWorker: Worker;
  let receiver: TestUpstream;
  const received: Received[] = [];
  /** Per path: how to answer (status codes in turn, the last one repeating), or 'hold' to never answer. */
  const behaviour = new Map<string, number[] | 'hold'>();
  let owner: RegisteredUser;

  beforeAll(async () => {
    receiver = await startUpstream((req, res, seen) => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: seen.body?.toString('utf8') ?? '' });
      const plan = behaviour.get(path) ?? [200];
      if (plan === 'hold') return;
      const status = plan.length > 1 ? plan.shift()! : plan[0]!;
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status === 200 ? 'ok' : 'receiver is down');
    });
    mail = await startMailServer();
    // Short backoff and few attempts, so retries and giving up happen within the test.
    app = await createTestApp({
      REDIS_PREFIX: redisPrefix,
      TEMPORAL_TASK_QUEUE: taskQueue,
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_ATTEMPTS: '3',
    });
    await loadCookbooks(app.deps.sql);
    redis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix });
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis, redisPrefix, smtpUrl: mail.url, publicUrl: 'http://127.0.0.1:3997' });
    temporalWorker = await startWorker({ taskQueue, sql: app.deps.sql, redis, redisPrefix });
    owner = await registerUser(app);
  }, 60_000);
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.close();
    await emailWorker?.close();
    await temporalWorker?.stop();
    await redis?.quit();
    await receiver?.close();
    await mail?.close();
  });

  const register = async (path: string, eventTypes: string[], who: RegisteredUser = owner) =>
    expectOk<{ webhook: { id: string; url: string }; secret: string }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: bearer(who.fullKey),
        payload: { url: `${receiver.url}${path}`, eventTypes },
      }),
      201,
    );
  const waitFor = <T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 15_000): Promise<T> =>
    eventually(what, probe, { timeoutMs, context: () => `received: ${received.map((r) => r.path).join(', ')}` });
  const at = (path: string) => received.filter((r) => r.path === path);
  const verify = (secret: string, request: Received) =>
    new Webhook(secret).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as { type: string; timestamp: string; data: Record<string, unknown> };
  const deliveries = async (id: string) =>
    expectOk<{
      deliveries: {
        id: string;
        eventId: string;
        eventType: string;
        status: string;
        attempts: number;
        lastStatusCode: number | null;
        lastError: string | null;
      }[];
    }>(await app.inject({ method: 'GET', url: `/api/v1/webhooks/${id}/deliveries`, headers: bearer(owner.fullKey) })).deliveries;

  it('does not wait for Redis for ever when emitting: the event and its delivery are recorded, and the call gives up within seconds', async () => {
    const who = await registerUser(app);
    const { webhook } = await register('/while-redis-away', ['key.revoked'], who);
    // As an edge whose Redis is away: a BullMQ queue would wait for it as long as it is gone.
    const away = createRedis('redis://127.0.0.1:1', 'request-path');
    const emitter = new WebhookEmitter(app.deps.sql, away, redisPrefix, app.deps.settings);
    try {
      const started = Date.now();
      await expect(emitter.emit(who.accountId, 'key.revoked', { keyId: 'key_test', kind: 'api' })).rejects.toThrow(
        /the sweeper queues them\) timed out after 3000 ms/,
      );
      expect(Date.now() - started).toBeLessThan(6_000);
      const recorded = expectOk<{ deliveries: { eventType: string; status: string }[] }>(
        await app.inject({ method: 'GET', url: `/api/v1/webhooks/${webhook.id}/deliveries`, headers: bearer(who.fullKey) }),
      ).deliveries;
      expect(recorded).toEqual([expect.objectContaining({ eventType: 'key.revoked', status: 'pending' })]);
    } finally {
      away.disconnect();
      void emitter.close().catch(() => {});
    }
  });

  it('registers endpoints with a secret shown once, lists them without it, and refuses bad URLs and agent keys', async () => {
    const created = await register('/crud', ['key.revoked']);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
    const listed = await app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: bearer(owner.fullKey) });
    expect(expectOk<{ webhooks: { id: string; status: string }[] }>(listed).webhooks).toEqual([
      expect.objectContaining({ id: created.webhook.id, status: 'enabled' }),
    ]);
    expect(listed.body).not.toContain(created.secret);
    const post = (url: string, eventTypes: unknown = ['key.revoked'], headers = bearer(owner.fullKey)) =>
      app.inject({ method: 'POST', url: '/api/v1/webhooks', headers, payload: { url, eventTypes } });
    expectError(await post('not a url'), 400, 'validation_failed');
    expectError(await post('ftp://example.com/x'), 400, 'validation_failed');
    expectError(await post('https://user:pw@example.com/x'), 400, 'validation_failed');
    expectError(await post('https://example.com/x', ['no.such.event']), 400, 'validation_failed');
    expectError(await post('https://example.com/x', []), 400, 'validation_failed');
    const agent = expectOk<{ fullKey: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: bearer(owner.fullKey), payload: { name: 'a' } }),
      201,
    );
    expectError(await post('https://example.com/x', ['key.revoked'], bearer(agent.fullKey)), 403, 'agent_key_forbidden');
    // Without ALLOW_PRIVATE_UPSTREAMS (production), http and private hosts are refused.
    const strict = await createTestApp({ REDIS_PREFIX: redisPrefix, ALLOW_PRIVATE_UPSTREAMS: 'false' });
    try {
      const strictPost = (url: string) =>
        strict.inject({ method: 'POST', url: '/api/v1/webhooks', headers: bearer(owner.fullKey), payload: { url, eventTypes: ['key.revoked'] } });
      expectError(await strictPost('http://example.com/x'), 400, 'validation_failed');
      expect(expectError(await strictPost('https://127.0.0.1/x'), 400, 'validation_failed').error).toContain('private');
      // IPv6 forms that carry a loopback IPv4 address (finding 13: once accepted in production).
      for (const host of ['[::127.0.0.1]', '[::ffff:0:7f00:1]', '[2002:7f00:1::]', '[64:ff9b::7f00:1]', '[::ffff:169.254.169.254]']) {
        expect(expectError(await strictPost(`https://${host}/x`), 400, 'validation_failed').error, host).toContain('private');
      }
    } finally {
      await strict.close();
    }
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${created.webhook.id}`, headers: bearer(owner.fullKey) }));
    expectError(
      await app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${created.webhook.id}`, headers: bearer(owner.fullKey) }),
      404,
      'not_found',
    );
  });

  it('delivers key.revoked and topup.succeeded signed per Standard Webhooks, only to endpoints listening to them', async () => {
    const keys = await register('/keys', ['key.revoked']);
    const money = await register('/money', ['topup.succeeded']);
    const key = expectOk<{ key: { id: string }; fullKey: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(owner.fullKey), payload: { name: 'to revoke' } }),
      201,
    );
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/keys/${key.key.id}`, headers: bearer(owner.fullKey) }));
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(owner.fullKey), payload: { amount: 2 } }));

    const revoked = await waitFor('key.revoked', () => at('/keys')[0]);
    const event = verify(keys.secret, revoked);
    expect(event).toMatchObject({ type: 'key.revoked', data: { keyId: key.key.id, kind: 'api', name: 'to revoke' } });
    expect(revoked.body).not.toContain(key.fullKey);
    expect(() => verify(money.secret, revoked)).toThrow();
    const topup = await waitFor('topup.succeeded', () => at('/money')[0]);
    expect(verify(money.secret, topup)).toMatchObject({ type: 'topup.succeeded', data: { amount: 2, mode: 'sandbox' } });
    expect(at('/keys').every((r) => JSON.parse(r.body).type === 'key.revoked')).toBe(true);
    // A tampered body or a stale timestamp fails verification, as receivers must check.
    expect(() => verify(keys.secret, { ...revoked, body: revoked.body.replace('to revoke', 'tampered') })).toThrow();
    await waitFor('delivery log', async () => ((await deliveries(keys.webhook.id))[0]?.status === 'succeeded' ? true : undefined));
    expect(await deliveries(keys.webhook.id)).toEqual([
      expect.objectContaining({ eventType: 'key.revoked', status: 'succeeded', attempts: 1, lastStatusCode: 200 }),
    ]);
  });

  it('retries a failing endpoint with backoff until it recovers, logs each attempt, and re-sends on manual retry with the same webhook-id', async () => {
    behaviour.set('/flaky', [500, 503, 200]);
    const flaky = await register('/flaky', ['webhook.test']);
    const test = expectOk<{ delivery: { id: string } }>(
      await app.inject({ method: 'POST', url: `/api/v1/webhooks/${flaky.webhook.id}/test`, headers: bearer(owner.fullKey) }),
      202,
    );
    const log = await waitFor('recovery', async () => {
      const rows = await deliveries(flaky.webhook.id);
      return rows[0]?.status === 'succeeded' ? rows : undefined;
    });
    expect(log).toEqual([expect.objectContaining({ id: test.delivery.id, status: 'succeeded', attempts: 3, lastStatusCode: 200 })]);
    expect(at('/flaky')).toHaveLength(3);
    const ids = new Set(at('/flaky').map((r) => r.headers['webhook-id']));
    expect(ids.size).toBe(1);
    for (const request of at('/flaky')) expect(verify(flaky.secret, request).type).toBe('webhook.test');

    expectOk(
      await app.inject({
        method: 'POST',
        url: `/api/v1/webhooks/${flaky.webhook.id}/deliveries/${test.delivery.id}/retry`,
        headers: bearer(owner.fullKey),
      }),
      202,
    );
    await waitFor('manual retry', () => (at('/flaky').length === 4 ? true : undefined));
    expect(at('/flaky')[3]?.headers['webhook-id']).toBe([...ids][0]);
  });

  it('gives up after the last attempt, disables an endpoint that keeps failing and tells the account by e-mail', async () => {
    behaviour.set('/dead', [500]);
    const dead = await register('/dead', ['webhook.test']);
    expectOk(await app.inject({ method: 'POST', url: `/api/v1/webhooks/${dead.webhook.id}/test`, headers: bearer(owner.fullKey) }), 202);
    const message = await mail.waitFor((m) => recipientOf(m).includes(owner.email) && m.subject === 'A webhook endpoint was disabled');
    expect(message.text).toContain(`${receiver.url}/dead`);
    expect(message.text).toContain('HTTP 500');
    expect(at('/dead')).toHaveLength(3);
    const [row] = await deliveries(dead.webhook.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 3, lastStatusCode: 500 });
    const listed = expectOk<{ webhooks: { id: string; status: string; disabledReason: string | null }[] }>(
      await app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: bearer(owner.fullKey) }),
    ).webhooks.find((w) => w.id === dead.webhook.id);
    expect(listed).toMatchObject({ status: 'disabled', disabledReason: expect.stringContaining('HTTP 500') });
    // Disabled: tests and retries are refused until the account enables it again.
    expectError(
      await app.inject({ method: 'POST', url: `/api/v1/webhooks/${dead.webhook.id}/test`, headers: bearer(owner.fullKey) }),
      409,
      'conflict',
    );
    behaviour.set('/dead', [200]);
    expectOk(
      await app.inject({ method: 'PATCH', url: `/api/v1/webhooks/${dead.webhook.id}`, headers: bearer(owner.fullKey), payload: { enabled: true } }),
    );
    expectOk(
      await app.inject({ method: 'POST', url: `/api/v1/webhooks/${dead.webhook.id}/deliveries/${row!.id}/retry`, headers: bearer(owner.fullKey) }),
      202,
    );
    await waitFor('retried delivery', async () => ((await deliveries(dead.webhook.id))[0]?.status === 'succeeded' ? true : undefined));
  });

  it('signs with both secrets for a day after a rotation, so receivers holding either verify', async () => {
    const rotating = await register('/rotating', ['webhook.test']);
    const rotated = expectOk<{ secret: string; previousSecretValidUntil: string }>(
      await app.inject({ method: 'POST', url: `/api/v1/webhooks/${rotating.webhook.id}/rotate-secret`, headers: bearer(owner.fullKey) }),
    );
    expect(rotated.secret).not.toBe(rotating.secret);
    expectOk(await app.inject({ method: 'POST', url: `/api/v1/webhooks/${rotating.webhook.id}/test`, headers: bearer(owner.fullKey) }), 202);
    const request = await waitFor('rotated delivery', () => at('/rotating')[0]);
    expect(String(request.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(rotated.secret, request).type).toBe('webhook.test');
    expect(verify(rotating.secret, request).type).toBe('webhook.test');
  });

  it('refuses to deliver to a private address when private upstreams are not allowed (the SSRF guard)', async () => {
    await worker.close();
    const strictWorker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix, allowPrivate: false });
    try {
      behaviour.set('/private', [200]);
      const endpoint = await register('/private', ['webhook.test']);
      expectOk(await app.inject({ method: 'POST', url: `/api/v1/webhooks/${endpoint.webhook.id}/test`, headers: bearer(owner.fullKey) }), 202);
      const [row] = await waitFor('refused delivery', async () => {
        const rows = await deliveries(endpoint.webhook.id);
        return rows[0]?.status === 'failed' ? rows : undefined;
      });
      expect(row?.lastError).toContain('private address');
      expect(at('/private')).toHaveLength(0);
    } finally {
      await strictWorker.close();
      worker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix });
    }
  });

  it('loses and doubles nothing when the worker dies mid-delivery: every event arrives, one webhook-id each, every delivery succeeds', async () => {
    await worker.close();
    const quickStall = { lockDuration: 1_500, stalledInterval: 500 };
    const dying = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix, options: quickStall });
    behaviour.set('/restart', 'hold');
    const endpoint = await register('/restart', ['webhook.test']);
    const sent: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      sent.push(
        expectOk<{ delivery: { id: string } }>(
          await app.inject({ method: 'POST', url: `/api/v1/webhooks/${endpoint.webhook.id}/test`, headers: bearer(owner.fullKey) }),
          202,
        ).delivery.id,
      );
    }
    // The worker has POSTs in flight that the receiver holds: kill it there (no graceful finish).
    await waitFor('deliveries in flight', () => (at('/restart').length >= 4 ? true : undefined));
    await dying.close(true);
    behaviour.set('/restart', [200]);
    worker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix, options: quickStall });
    const rows = await waitFor(
      'every delivery to succeed',
      async () => {
        const list = await deliveries(endpoint.webhook.id);
        return list.length === 6 && list.every((d) => d.status === 'succeeded') ? list : undefined;
      },
      30_000,
    );
    expect(rows.map((d) => d.id).sort()).toEqual([...sent].sort());
    // Every event reached the receiver; those cut off in flight arrived again with the same id, which
    // is how receivers deduplicate (Standard Webhooks), so each event is processed once.
    const eventIds = new Set(rows.map((d) => d.eventId));
    const arrivedIds = new Set(at('/restart').map((r) => String(r.headers['webhook-id'])));
    expect(arrivedIds).toEqual(eventIds);
    const answered = at('/restart').length;
    expect(answered).toBeGreaterThanOrEqual(6);
    expect(answered).toBeLessThanOrEqual(6 + 4);
  }, 60_000);

  it("sends session events to the account's endpoints: a human step waiting, and the session's end", async () => {
    const sessions = await register('/sessions', ['human_step.pending', 'session.completed']);
    const selectedApis = { weather: await createTestApi(app.deps.sql, 'weather'), sms: await createTestApi(app.deps.sql, 'sms') };
    const started = expectOk<{ session: { sessionId: string } }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: bearer(owner.fullKey),
        payload: { selectedApis },
      }),
      201,
    );
    const id = started.session.sessionId;
    const agent = (stepId: string, resultData: unknown) =>
      app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: bearer(owner.fullKey),
        payload: { stepId, resultData } as object,
      });
    expectOk(await agent('fetch-forecast', { location: { lat: 60.39, lon: 5.32 }, severe: false, alerts: [] }));
    expectOk(await agent('draft-message', { message: 'All calm.', recipients: ['+4712345678'] }));
    const pending = await waitFor('human_step.pending', () => at('/sessions').find((r) => JSON.parse(r.body).type === 'human_step.pending'));
    expect(verify(sessions.secret, pending)).toMatchObject({ type: 'human_step.pending', data: { sessionId: id, stepId: 'approve-wording' } });
    expect(String(pending.headers['webhook-id'])).toMatch(new RegExp(`^msg_${id}_\\d+$`));
  });

  it('announces balance.low once when a charge crosses the threshold, and balance.depleted once when a call is refused; a top-up re-arms them', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 25_000n });
    const endpoint = expectOk<{ webhook: { id: string }; secret: string }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: bearer(account.fullKey),
        payload: { url: `${receiver.url}/balance`, eventTypes: ['balance.low', 'balance.depleted', 'topup.succeeded'] },
      }),
      201,
    );
    expectError(
      await app.inject({ method: 'PUT', url: '/api/v1/balance/alerts', headers: bearer(account.fullKey), payload: { lowBalanceThreshold: -1 } }),
      400,
      'validation_failed',
    );
    expect(
      expectOk<{ lowBalanceThreshold: number }>(
        await app.inject({ method: 'PUT', url: '/api/v1/balance/alerts', headers: bearer(account.fullKey), payload: { lowBalanceThreshold: 0.02 } }),
      ).lowBalanceThreshold,
    ).toBe(0.02);
    const buy = () => app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) });
    const types = () => at('/balance').map((r) => verify(endpoint.secret, r).type);
    expectOk(await buy()); // 0.025 -> 0.015: crosses 0.02
    await waitFor('balance.low', () => (types().includes('balance.low') ? true : undefined));
    expectOk(await buy()); // 0.015 -> 0.005: already low
    expectError(await buy(), 402, 'insufficient_balance');
    await waitFor('balance.depleted', () => (types().includes('balance.depleted') ? true : undefined));
    expectError(await buy(), 402, 'insufficient_balance');
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 0.02 } })); // 0.025
    expectOk(await buy()); // 0.025 -> 0.015: crosses again after the top-up re-armed it
    await waitFor('second balance.low', () => (types().filter((t) => t === 'balance.low').length === 2 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Each crossing once (deliveries run concurrently, so their arrival order is not asserted).
    expect(types().sort()).toEqual(['balance.depleted', 'balance.low', 'balance.low', 'topup.succeeded']);
    const low = at('/balance')
      .map((r) => verify(endpoint.secret, r))
      .find((e) => e.type === 'balance.low');
    expect(low?.data).toEqual({ balance: 0.015, threshold: 0.02 });
  });

  it('e-mails the account events the owner chose (balance.low by default, key.revoked when asked), once per event', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 25_000n });
    const [owner] = await app.deps.sql<{ email: string }[]>`select email from accounts where id = ${account.accountId}`;
    const preferences = (body?: object) =>
      app.inject({
        method: body ? 'PUT' : 'GET',
        url: '/api/v1/notifications/email',
        headers: bearer(account.fullKey),
        ...(body ? { payload: body } : {}),
      });
    expect(expectOk<{ eventTypes: string[]; email: string }>(await preferences())).toEqual(
      expect.objectContaining({ eventTypes: ['balance.low', 'balance.depleted'], email: owner!.email }),
    );
    expectError(await preferences({ eventTypes: ['human_step.pending'] }), 400, 'validation_failed');
    expect(expectOk<{ eventTypes: string[] }>(await preferences({ eventTypes: ['balance.low', 'key.revoked'] })).eventTypes).toEqual([
      'balance.low',
      'key.revoked',
    ]);

    expectOk(
      await app.inject({ method: 'PUT', url: '/api/v1/balance/alerts', headers: bearer(account.fullKey), payload: { lowBalanceThreshold: 0.02 } }),
    );
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) }));
    const low = await mail.waitFor((m) => recipientOf(m).includes(owner!.email) && m.subject === 'Your balance is low');
    expect(low.text).toContain('Your balance is $0.015, below the $0.02 you set.');
    const key = expectOk<{ key: { id: string } }>(
      await app.inject({ method: 'POST', url: '/api/v1/keys', headers: bearer(account.fullKey), payload: { name: 'old laptop' } }),
      201,
    );
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/keys/${key.key.id}`, headers: bearer(account.fullKey) }));
    const revoked = await mail.waitFor((m) => recipientOf(m).includes(owner!.email) && m.subject === 'A key was revoked');
    expect(revoked.text).toContain('"old laptop"');
    // Not asked for: no e-mail for the top-up; and each event only once.
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 1 } }));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const mine = mail.messages.filter((m) => recipientOf(m).includes(owner!.email)).map((m) => m.subject);
    expect(mine.sort()).toEqual(['A key was revoked', 'Your balance is low']);
  });
});
