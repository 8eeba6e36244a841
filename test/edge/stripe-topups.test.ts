import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestAccount, type TestAccount } from '#fixtures/accounts';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { chargeAutoTopup, reconcileAutoTopups, requestAutoTopup } from '#core/billing';
import { createRedis } from '#core/platform';
import { autoTopupProcessor } from '#workers/queues/auto-topup';
import { loadWorkerSettings } from '#workers/settings';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';

const WEBHOOK_SECRET = 'whsec_test_local_secret';

/**
 * Live top-ups through Stripe (issue 16), without the internet: the official `stripe` package is
 * pointed (its host/port/protocol options, STRIPE_API_URL) at a local HTTP server this test runs,
 * which records the requests and answers with Stripe-shaped Checkout Session objects; webhooks are
 * signed with the package's generateTestHeaderString. Nothing here talked to Stripe itself.
 */
describe('live top-ups through Stripe Checkout', () => {
  let app: FastifyInstance;
  let stripeServer: Server;
  const seen: { method: string; path: string; form: URLSearchParams; headers: Record<string, string | string[] | undefined> }[] = [];
  const sessionsByIdempotencyKey = new Map<string, Record<string, unknown>>();
  let sessionCount = 0;
  let declinePayments = false;
  /** Payments answered as still processing (a delayed method); GET /v1/payment_intents/:id then answers them succeeded. */
  let processingPayments = false;
  const intentsMade = new Map<string, Record<string, unknown>>();
  /** Checkout Session id by top-up id, as the local server made them. */
  const sessionsCreated = new Map<string, string>();
  const signer = new Stripe('sk_test_signer_only');
  let eventCount = 0;

  beforeAll(async () => {
    stripeServer = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        seen.push({ method: req.method ?? '', path: req.url ?? '', form, headers: req.headers });
        const json = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${seen.length}` });
          res.end(JSON.stringify(body));
        };
        if (req.method === 'POST' && req.url === '/v1/customers') {
          return json(200, {
            id: `cus_test_${seen.length}`,
            object: 'customer',
            email: form.get('email'),
            metadata: { accountId: form.get('metadata[accountId]') },
          });
        }
        if (req.method === 'GET' && req.url?.startsWith('/v1/setup_intents/')) {
          const id = req.url.slice('/v1/setup_intents/'.length);
          return json(200, { id, object: 'setup_intent', status: 'succeeded', payment_method: `pm_for_${id}` });
        }
        if (req.method === 'POST' && req.url === '/v1/payment_intents') {
          if (declinePayments) {
            return json(402, {
              error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds', message: 'Your card was declined.' },
            });
          }
          const intent = {
            id: `pi_test_${seen.length}`,
            object: 'payment_intent',
            status: 'succeeded',
            amount: Number(form.get('amount')),
            amount_received: Number(form.get('amount')),
            currency: form.get('currency'),
            customer: form.get('customer'),
            metadata: { accountId: form.get('metadata[accountId]'), topUpId: form.get('metadata[topUpId]'), purpose: form.get('metadata[purpose]') },
          };
          intentsMade.set(intent.id, intent);
          return json(200, processingPayments ? { ...intent, status: 'processing', amount_received: 0 } : intent);
        }
        if (req.method === 'GET' && req.url?.startsWith('/v1/payment_intents/')) {
          const intent = intentsMade.get(req.url.slice('/v1/payment_intents/'.length));
          if (intent) return json(200, intent);
        }
        if (req.method === 'POST' && req.url === '/v1/checkout/sessions' && form.get('mode') === 'setup') {
          sessionCount += 1;
          return json(200, {
            id: `cs_setup_${sessionCount}`,
            object: 'checkout.session',
            mode: 'setup',
            status: 'open',
            customer: form.get('customer'),
            setup_intent: `seti_${sessionCount}`,
            url: `https://checkout.stripe.com/c/pay/cs_setup_${sessionCount}`,
            metadata: { accountId: form.get('metadata[accountId]'), purpose: form.get('metadata[purpose]') },
          });
        }
        if (req.method === 'POST' && req.url === '/v1/checkout/sessions') {
          const key = req.headers['idempotency-key'];
          const existing = typeof key === 'string' ? sessionsByIdempotencyKey.get(key) : undefined;
          sessionCount += 1;
          const session = existing ?? {
            id: `cs_test_${sessionCount}`,
            object: 'checkout.session',
            mode: form.get('mode'),
            status: 'open',
            payment_status: 'unpaid',
            url: `https://checkout.stripe.com/c/pay/cs_test_${sessionCount}`,
            amount_total: Number(form.get('line_items[0][price_data][unit_amount]')),
            currency: form.get('line_items[0][price_data][currency]'),
            client_reference_id: form.get('client_reference_id'),
            metadata: { topUpId: form.get('metadata[topUpId]'), accountId: form.get('metadata[accountId]') },
          };
          if (typeof key === 'string') sessionsByIdempotencyKey.set(key, session);
          sessionsCreated.set(String(form.get('metadata[topUpId]')), String(session.id));
          res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${sessionCount}` });
          res.end(JSON.stringify(session));
          return;
        }
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { type: 'invalid_request_error', message: `no route ${req.method} ${req.url}` } }));
      });
    });
    await new Promise<void>((resolve) => stripeServer.listen(0, '127.0.0.1', resolve));
    const { port } = stripeServer.address() as AddressInfo;
    app = await createTestApp({
      BILLING_MODE: 'live',
      STRIPE_SECRET_KEY: 'sk_test_local_server',
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_API_URL: `http://127.0.0.1:${port}`,
      TOPUP_MIN_DOLLARS: '5',
      TOPUP_MAX_DOLLARS: '500',
      REDIS_PREFIX: uniqueId('stripe'),
    });
  });
  afterAll(async () => {
    await app?.close();
    await new Promise<void>((resolve) => stripeServer?.close(() => resolve()));
  });

  const balanceOf = async (account: TestAccount) =>
    expectOk<{ balance: number }>(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(account.fullKey) })).balance;
  const ledgerMatches = async (account: TestAccount) => {
    const [row] = await app.deps.sql<{ sum: string; balance: string }[]>`
      select (select coalesce(sum(amount_micros), 0) from ledger_entries where account_id = ${account.accountId})::text as sum,
             (select balance_micros from accounts where id = ${account.accountId})::text as balance`;
    expect(row!.sum).toBe(row!.balance);
  };
  const startTopUp = async (account: TestAccount, amount: number | string, headers: Record<string, string> = {}) =>
    expectOk<{ checkoutUrl: string; topUpId: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/balance', headers: { ...bearer(account.fullKey), ...headers }, payload: { amount } }),
    );
  const sessionFor = (topUpId: string) => seen.filter((r) => r.path === '/v1/checkout/sessions' && r.form.get('metadata[topUpId]') === topUpId);

  /** Sends an event to the edge signed as Stripe would; `id` lets a test redeliver one. */
  function deliver(type: string, object: Record<string, unknown>, options: { id?: string; secret?: string; signature?: string | null } = {}) {
    eventCount += 1;
    const payload = JSON.stringify({
      id: options.id ?? `evt_test_${eventCount}_${Date.now()}`,
      object: 'event',
      type,
      api_version: '2025-01-01',
      created: Math.floor(Date.now() / 1000),
      data: { object },
    });
    const signature =
      options.signature === undefined
        ? signer.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? WEBHOOK_SECRET })
        : options.signature;
    return app.inject({
      method: 'POST',
      url: '/api/webhooks/stripe',
      headers: { 'content-type': 'application/json', ...(signature === null ? {} : { 'stripe-signature': signature }) },
      payload,
    });
  }
  const paidSession = (account: TestAccount, topUpId: string, amountCents: number, extra: Record<string, unknown> = {}) => ({
    id: sessionsCreated.get(topUpId) ?? `cs_test_unknown_${topUpId}`,
    object: 'checkout.session',
    payment_status: 'paid',
    status: 'complete',
    amount_total: amountCents,
    currency: 'usd',
    client_reference_id: account.accountId,
    payment_intent: `pi_for_${topUpId}`,
    metadata: { topUpId, accountId: account.accountId },
    ...extra,
  });

  it('POST /balance creates a Checkout Session in payment mode for the amount and credits nothing yet', async () => {
    const account = await createTestAccount(app.deps.sql);
    const started = await startTopUp(account, 20, { 'idempotency-key': 'first-topup' });
    expect(started.checkoutUrl).toMatch(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_\d+$/);
    const [request] = sessionFor(started.topUpId);
    expect(request?.headers.authorization).toBe('Bearer sk_test_local_server');
    expect(Object.fromEntries(request!.form)).toMatchObject({
      mode: 'payment',
      client_reference_id: account.accountId,
      'line_items[0][price_data][unit_amount]': '2000',
      'line_items[0][price_data][currency]': 'usd',
      'line_items[0][quantity]': '1',
      'metadata[accountId]': account.accountId,
      'payment_intent_data[metadata][topUpId]': started.topUpId,
    });
    expect(request!.form.get('success_url')).toContain(`topUpId=${started.topUpId}`);
    expect(String(request?.headers['idempotency-key'])).toBe(`topup:${account.accountId}:first-topup`);
    // The same key again answers the same page; with another amount it is a conflict.
    const again = await startTopUp(account, 20, { 'idempotency-key': 'first-topup' });
    expect(again).toEqual(started);
    expect(sessionFor(started.topUpId)).toHaveLength(1);
    expectError(
      await app.inject({
        method: 'POST',
        url: '/api/v1/balance',
        headers: { ...bearer(account.fullKey), 'idempotency-key': 'first-topup' },
        payload: { amount: 30 },
      }),
      409,
      'idempotency_conflict',
    );
    expect(await balanceOf(account)).toBe(0);
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 1 } }),
      400,
      'validation_failed',
    );
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 501 } }),
      400,
      'validation_failed',
    );
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: '10.005' } }),
      400,
      'validation_failed',
    );
  });

  it('credits from the webhook only, with the amount the event carries, once per event and per session; a bad signature changes nothing', async () => {
    const account = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(account, 20);
    // The event says $15 was paid (say, a discount at Checkout): that is what is credited.
    const session = paidSession(account, topUpId, 1500);
    expectError(await deliver('checkout.session.completed', session, { secret: 'whsec_wrong' }), 400, 'validation_failed');
    expectError(await deliver('checkout.session.completed', session, { signature: null }), 400, 'validation_failed');
    expectError(await deliver('checkout.session.completed', session, { signature: 't=1,v1=deadbeef' }), 400, 'validation_failed');
    expect(await balanceOf(account)).toBe(0);

    const first = await deliver('checkout.session.completed', session, { id: `evt_paid_${topUpId}` });
    expect(expectOk<{ outcome: string }>(first).outcome).toBe('credited');
    expect(await balanceOf(account)).toBe(15);
    // Redelivered (same event id), and a second event for the same session: nothing more.
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.completed', session, { id: `evt_paid_${topUpId}` })).outcome).toBe(
      'duplicate',
    );
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.async_payment_succeeded', session)).outcome).toBe('already credited');
    expect(await balanceOf(account)).toBe(15);
    // A session that is not ours, or names another account, credits nothing.
    const stranger = await createTestAccount(app.deps.sql);
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.completed', paidSession(stranger, topUpId, 99_900))).outcome).toBe(
      'unknown top-up',
    );
    expect(await balanceOf(stranger)).toBe(0);
    await ledgerMatches(account);
  });

  it('credits once when two deliveries of the same event race', async () => {
    const account = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(account, 40);
    const session = paidSession(account, topUpId, 4000);
    const results = await Promise.all(Array.from({ length: 5 }, () => deliver('checkout.session.completed', session, { id: `evt_race_${topUpId}` })));
    for (const res of results) expect(res.statusCode, res.body).toBe(200);
    expect(results.map((r) => JSON.parse(r.body).outcome).filter((o: string) => o === 'credited')).toHaveLength(1);
    expect(await balanceOf(account)).toBe(40);
    await ledgerMatches(account);
  });

  it('an unpaid (delayed) completion waits for async_payment_succeeded', async () => {
    const account = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(account, 10);
    expect(
      expectOk<{ outcome: string }>(await deliver('checkout.session.completed', paidSession(account, topUpId, 1000, { payment_status: 'unpaid' })))
        .outcome,
    ).toBe('awaiting payment');
    expect(await balanceOf(account)).toBe(0);
    expect(
      expectOk<{ outcome: string }>(await deliver('checkout.session.async_payment_succeeded', paidSession(account, topUpId, 1000))).outcome,
    ).toBe('credited');
    expect(await balanceOf(account)).toBe(10);
  });

  it('a refund takes back what was credited, below zero if it was spent, and calls get 402 until the balance is positive', async () => {
    const account = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(account, 5);
    expectOk(await deliver('checkout.session.completed', paidSession(account, topUpId, 500)));
    for (let i = 0; i < 2; i += 1)
      expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) }));
    expect(await balanceOf(account)).toBe(4.98);
    const charge = { id: `ch_${topUpId}`, object: 'charge', payment_intent: `pi_for_${topUpId}`, amount: 500, amount_refunded: 300 };
    expect(expectOk<{ outcome: string }>(await deliver('charge.refunded', charge)).outcome).toBe('refund applied');
    expect(await balanceOf(account)).toBe(1.98);
    // The rest refunded later (cumulative amount_refunded), and that event delivered twice.
    const full = { ...charge, amount_refunded: 500 };
    expectOk(await deliver('charge.refunded', full, { id: `evt_full_refund_${topUpId}` }));
    expectOk(await deliver('charge.refunded', full, { id: `evt_full_refund_${topUpId}` }));
    expect(await balanceOf(account)).toBe(-0.02);
    const refused = expectError(
      await app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) }),
      402,
      'insufficient_balance',
    );
    expect(refused.balance).toBe(-0.02);
    await ledgerMatches(account);
  });

  it('a refund that arrives before the payment is applied when the payment is credited; a dispute takes back the disputed amount', async () => {
    const early = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(early, 30);
    expectOk(
      await deliver('charge.refunded', {
        id: `ch_${topUpId}`,
        object: 'charge',
        payment_intent: `pi_for_${topUpId}`,
        amount: 3000,
        amount_refunded: 3000,
      }),
    );
    expect(await balanceOf(early)).toBe(0);
    expectOk(await deliver('checkout.session.completed', paidSession(early, topUpId, 3000)));
    expect(await balanceOf(early)).toBe(0);
    const kinds = await app.deps.sql<
      { kind: string; amount_micros: bigint }[]
    >`select kind, amount_micros from ledger_entries where account_id = ${early.accountId} order by seq`;
    expect(kinds.map((k) => [k.kind, k.amount_micros])).toEqual([
      ['topup', 30_000_000n],
      ['clawback', -30_000_000n],
    ]);

    const disputed = await createTestAccount(app.deps.sql);
    const second = await startTopUp(disputed, 50);
    expectOk(await deliver('checkout.session.completed', paidSession(disputed, second.topUpId, 5000)));
    const inquiry = {
      id: `dp_inq_${second.topUpId}`,
      object: 'dispute',
      payment_intent: `pi_for_${second.topUpId}`,
      amount: 5000,
      status: 'warning_needs_response',
    };
    expect(expectOk<{ outcome: string }>(await deliver('charge.dispute.created', inquiry)).outcome).toBe('inquiry ignored');
    expect(await balanceOf(disputed)).toBe(50);
    const dispute = {
      id: `dp_${second.topUpId}`,
      object: 'dispute',
      payment_intent: `pi_for_${second.topUpId}`,
      amount: 5000,
      status: 'needs_response',
    };
    expect(expectOk<{ outcome: string }>(await deliver('charge.dispute.created', dispute)).outcome).toBe('dispute applied');
    expect(await balanceOf(disputed)).toBe(0);
    // Won: the money comes back, once.
    const won = { ...dispute, status: 'won' };
    expect(expectOk<{ outcome: string }>(await deliver('charge.dispute.closed', won)).outcome).toBe('dispute won');
    expectOk(await deliver('charge.dispute.closed', won));
    expect(await balanceOf(disputed)).toBe(50);
    // Then the payment is refunded in full: taken back again, the same amount as the first time.
    const refunded = {
      id: `ch_${second.topUpId}`,
      object: 'charge',
      payment_intent: `pi_for_${second.topUpId}`,
      amount: 5000,
      amount_refunded: 5000,
    };
    expect(expectOk<{ outcome: string }>(await deliver('charge.refunded', refunded)).outcome).toBe('refund applied');
    expect(await balanceOf(disputed)).toBe(0);
    await ledgerMatches(early);
    await ledgerMatches(disputed);
  });

  it('acknowledges event types it does not handle, and answers 404 where Stripe is not configured', async () => {
    expect(expectOk<{ outcome: string }>(await deliver('customer.created', { id: 'cus_1', object: 'customer' })).outcome).toBe('ignored');
    const sandbox = await createTestApp();
    try {
      const res = await sandbox.inject({
        method: 'POST',
        url: '/api/webhooks/stripe',
        headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=x' },
        payload: '{}',
      });
      expectError(res, 404, 'not_found');
    } finally {
      await sandbox.close();
    }
  });

  describe('auto top-up', () => {
    let worker: Worker;
    let redis: Redis;
    beforeAll(async () => {
      redis = createRedis(app.deps.settings.REDIS_URL, 'queue');
      const settings = loadWorkerSettings({
        ...process.env,
        DATABASE_URL: testDatabaseUrl(),
        REDIS_PREFIX: app.deps.settings.REDIS_PREFIX,
        STRIPE_SECRET_KEY: 'sk_test_local_server',
        STRIPE_API_URL: app.deps.settings.STRIPE_API_URL,
      });
      const processor = autoTopupProcessor({ sql: app.deps.sql, redis, settings, log: pino({ level: 'silent' }) });
      worker = new Worker(processor.job.queue, processor.process, { connection: redis, prefix: app.deps.settings.REDIS_PREFIX, concurrency: 2 });
      worker.on('error', () => {});
    });
    afterAll(async () => {
      await worker?.close();
      await redis?.quit();
    });

    const buy = (account: TestAccount) =>
      app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) });
    const state = async (account: TestAccount) =>
      expectOk<{ enabled: boolean; cardSaved: boolean; inFlight: boolean; failures: number; retryAfter: string | null; lastError: string | null }>(
        await app.inject({ method: 'GET', url: '/api/v1/balance/auto-topup', headers: bearer(account.fullKey) }),
      );
    const waitFor = <T>(what: string, probe: () => T | undefined | Promise<T | undefined>): Promise<T> =>
      eventually(what, probe, { timeoutMs: 15_000 });
    const intentsFor = (account: TestAccount) =>
      seen.filter((r) => r.path === '/v1/payment_intents' && r.form.get('metadata[accountId]') === account.accountId);

    it('saves a card through Checkout in setup mode, then charges it off-session from a queue job when a charge leaves the balance below the threshold; the webhook credits it', async () => {
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 5_015_000n });
      const configured = expectOk<{ enabled: boolean; cardSaved: boolean }>(
        await app.inject({
          method: 'PUT',
          url: '/api/v1/balance/auto-topup',
          headers: bearer(account.fullKey),
          payload: { enabled: true, threshold: 5, amount: 20 },
        }),
      );
      expect(configured).toMatchObject({ enabled: true, cardSaved: false });
      const setup = expectOk<{ checkoutUrl: string }>(
        await app.inject({ method: 'POST', url: '/api/v1/balance/auto-topup/setup', headers: bearer(account.fullKey) }),
      );
      expect(setup.checkoutUrl).toMatch(/cs_setup_/);
      const setupRequest = seen.filter((r) => r.path === '/v1/checkout/sessions' && r.form.get('mode') === 'setup').at(-1)!;
      const customer = setupRequest.form.get('customer')!;
      expect(customer).toMatch(/^cus_test_/);
      expect(setupRequest.form.get('metadata[accountId]')).toBe(account.accountId);
      // No card yet: nothing is attempted.
      expectOk(await buy(account)); // 5.015 -> 5.005
      const saved = await deliver('checkout.session.completed', {
        id: 'cs_setup_x',
        object: 'checkout.session',
        mode: 'setup',
        status: 'complete',
        customer,
        setup_intent: 'seti_for_test',
        metadata: { accountId: account.accountId, purpose: 'auto-topup-setup' },
      });
      expect(expectOk<{ outcome: string }>(saved).outcome).toBe('card saved');
      expect(await state(account)).toMatchObject({ cardSaved: true, inFlight: false });
      app.balanceAlerts.forget(account.accountId);

      expectOk(await buy(account)); // 5.005 -> 4.995: below $5
      const [intent] = await waitFor('the off-session PaymentIntent', () => (intentsFor(account).length > 0 ? intentsFor(account) : undefined));
      expect(Object.fromEntries(intent!.form)).toMatchObject({
        amount: '2000',
        currency: 'usd',
        customer,
        payment_method: 'pm_for_seti_for_test',
        off_session: 'true',
        confirm: 'true',
        'metadata[purpose]': 'auto-topup',
      });
      expect(String(intent!.headers['idempotency-key'])).toMatch(/^auto-topup:top_/);
      // Stripe answered succeeded: the worker credits it at once (a lost webhook cannot strand it).
      await waitFor('the credit', async () => ((await balanceOf(account)) === 24.995 ? true : undefined));
      expect(await state(account)).toMatchObject({ inFlight: false, failures: 0 });
      // The webhook that follows finds it credited.
      const topUpId = intent!.form.get('metadata[topUpId]')!;
      const confirmed = await deliver('payment_intent.succeeded', {
        id: 'pi_auto_1',
        object: 'payment_intent',
        status: 'succeeded',
        amount: 2000,
        amount_received: 2000,
        currency: 'usd',
        metadata: { accountId: account.accountId, topUpId, purpose: 'auto-topup' },
      });
      expect(expectOk<{ outcome: string }>(confirmed).outcome).toBe('already credited');
      expect(await balanceOf(account)).toBe(24.995);
      // Above the threshold again: further charges start nothing.
      expectOk(await buy(account));
      app.balanceAlerts.forget(account.accountId);
      expectOk(await buy(account));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(intentsFor(account)).toHaveLength(1);
      expect(await balanceOf(account)).toBe(24.975);
      await ledgerMatches(account);
    });

    it('a payment Stripe took whose webhook never came is credited by the reconciler, once, and auto top-up goes on', async () => {
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 5_005_000n });
      await app.deps
        .sql`update accounts set stripe_customer_id = ${`cus_late_${account.accountId.slice(0, 8)}`}, auto_topup_payment_method = 'pm_delayed',
                                             auto_topup_enabled = true, auto_topup_threshold_micros = 5000000, auto_topup_amount_micros = 10000000
                          where id = ${account.accountId}`;
      processingPayments = true;
      try {
        expectOk(await buy(account)); // below $5: the job charges, Stripe answers "processing"
        await waitFor('the pending payment', async () => {
          const [row] = await app.deps.sql<{ stripe_payment_intent_id: string | null }[]>`
            select stripe_payment_intent_id from topups where account_id = ${account.accountId} and kind = 'auto' and status = 'pending'`;
          return row?.stripe_payment_intent_id ?? undefined;
        });
      } finally {
        processingPayments = false;
      }
      // No webhook comes. A payment younger than the reconciler's age limit is left alone...
      const stripe = new Stripe('sk_test_local_server', { host: '127.0.0.1', port: (stripeServer.address() as AddressInfo).port, protocol: 'http' });
      await reconcileAutoTopups(app.deps.sql, stripe, 3_600);
      expect(await balanceOf(account)).toBe(4.995);
      // ...an older one is asked about, credited as the webhook would have, and the attempt ends.
      // A pending payment Stripe has never heard of (another account's) is reported and does not hold this one up.
      const stranger = await createTestAccount(app.deps.sql);
      await app.deps.sql`insert into topups (id, account_id, requested_micros, currency, kind, stripe_payment_intent_id, created_at)
                         values (${`top_unknown_${stranger.accountId.slice(0, 8)}`}, ${stranger.accountId}, 1000000, 'usd', 'auto', 'pi_nobody_made', now() - interval '1 day')`;
      const report = await reconcileAutoTopups(app.deps.sql, stripe, 0);
      expect(report).toMatchObject({ credited: 1, failed: 0, errors: [{ topUpId: `top_unknown_${stranger.accountId.slice(0, 8)}` }] });
      expect(await balanceOf(account)).toBe(14.995);
      expect(await state(account)).toMatchObject({ inFlight: false, failures: 0 });
      // Once: the next run finds nothing pending, and a late webhook finds it credited.
      expect(await reconcileAutoTopups(app.deps.sql, stripe, 0)).toMatchObject({ checked: 1, credited: 0, failed: 0 });
      const [topup] = await app.deps.sql<
        { status: string; credited_micros: bigint }[]
      >`select status, credited_micros from topups where account_id = ${account.accountId} and kind = 'auto'`;
      expect(topup).toEqual({ status: 'completed', credited_micros: 10_000_000n });
      expect(await balanceOf(account)).toBe(14.995);
    });

    it('an attempt that cannot be queued (Redis away) ends within seconds and backs off; its job, landing late, charges nothing', async () => {
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 4_000_000n });
      await app.deps
        .sql`update accounts set stripe_customer_id = ${`cus_late_job_${account.accountId.slice(0, 8)}`}, auto_topup_payment_method = 'pm_late_job',
                                             auto_topup_enabled = true, auto_topup_threshold_micros = 5000000, auto_topup_amount_micros = 10000000
                          where id = ${account.accountId}`;
      // Nothing listens on port 1: the add waits for a Redis that never comes.
      const away = createRedis('redis://127.0.0.1:1', 'request-path', { connectionName: 'auto-topup-test' });
      const started = Date.now();
      try {
        await expect(requestAutoTopup(app.deps.sql, away, app.deps.settings.REDIS_PREFIX, account.accountId, 500)).rejects.toThrow(
          /timed out after 500 ms/,
        );
      } finally {
        away.disconnect();
      }
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(await state(account)).toMatchObject({ inFlight: false, failures: 1, lastError: 'could not be queued' });
      // Redis comes back and the old job lands after a new attempt was claimed: it is not that attempt's job.
      await app.deps.sql`update accounts set auto_topup_retry_after = null where id = ${account.accountId}`;
      const [claim] = await app.deps.sql<{ since: Date }[]>`
        update accounts set auto_topup_in_flight_since = now() where id = ${account.accountId} returning auto_topup_in_flight_since as since`;
      const stripe = new Stripe('sk_test_local_server', { host: '127.0.0.1', port: (stripeServer.address() as AddressInfo).port, protocol: 'http' });
      const late = await chargeAutoTopup(
        app.deps.sql,
        stripe,
        app.deps.settings,
        account.accountId,
        'auto-topup-late',
        claim!.since.getTime() - 60_000,
      );
      expect(late).toEqual({ status: 'skipped' });
      expect(intentsFor(account)).toHaveLength(0);
      // The current attempt's own job does charge.
      const current = await chargeAutoTopup(app.deps.sql, stripe, app.deps.settings, account.accountId, 'auto-topup-current', claim!.since.getTime());
      expect(current).toMatchObject({ status: 'charged' });
      expect(intentsFor(account)).toHaveLength(1);
    });

    it('a declined card ends the attempt, records why, backs off, and the account is not charged twice', async () => {
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 5_005_000n });
      await app.deps
        .sql`update accounts set stripe_customer_id = ${`cus_decline_${account.accountId.slice(0, 8)}`}, auto_topup_payment_method = 'pm_declining',
                                             auto_topup_enabled = true, auto_topup_threshold_micros = 5000000, auto_topup_amount_micros = 10000000
                          where id = ${account.accountId}`;
      declinePayments = true;
      try {
        expectOk(await buy(account)); // below $5
        const failed = await waitFor('the declined attempt', async () => {
          const now = await state(account);
          return now.failures === 1 ? now : undefined;
        });
        expect(failed).toMatchObject({ inFlight: false, failures: 1, lastError: expect.stringContaining('card_declined') });
        expect(failed.retryAfter).not.toBeNull();
        expect(new Date(failed.retryAfter!).getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);
        const [topup] = await app.deps.sql<{ status: string }[]>`select status from topups where account_id = ${account.accountId} and kind = 'auto'`;
        expect(topup?.status).toBe('failed');
        // Backing off: the next charge below the threshold asks for nothing.
        app.balanceAlerts.forget(account.accountId);
        expectOk(await buy(account));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(intentsFor(account)).toHaveLength(1);
        expect(await balanceOf(account)).toBe(4.985);
      } finally {
        declinePayments = false;
      }
    });
  });
});
