import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestAccount, type TestAccount } from '#fixtures/accounts';

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
    expectOk<{ checkoutUrl: string; topUpId: string }>(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: { ...bearer(account.fullKey), ...headers }, payload: { amount } }));
  const sessionFor = (topUpId: string) => seen.filter((r) => r.path === '/v1/checkout/sessions' && r.form.get('metadata[topUpId]') === topUpId);

  /** Sends an event to the edge signed as Stripe would; `id` lets a test redeliver one. */
  function deliver(type: string, object: Record<string, unknown>, options: { id?: string; secret?: string; signature?: string | null } = {}) {
    eventCount += 1;
    const payload = JSON.stringify({ id: options.id ?? `evt_test_${eventCount}_${Date.now()}`, object: 'event', type, api_version: '2025-01-01', created: Math.floor(Date.now() / 1000), data: { object } });
    const signature = options.signature === undefined ? signer.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? WEBHOOK_SECRET }) : options.signature;
    return app.inject({ method: 'POST', url: '/api/webhooks/stripe', headers: { 'content-type': 'application/json', ...(signature === null ? {} : { 'stripe-signature': signature }) }, payload });
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
    expect(await balanceOf(account)).toBe(0);
    expectError(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 1 } }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 501 } }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: '10.005' } }), 400, 'validation_failed');
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
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.completed', session, { id: `evt_paid_${topUpId}` })).outcome).toBe('duplicate');
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.async_payment_succeeded', session)).outcome).toBe('already credited');
    expect(await balanceOf(account)).toBe(15);
    // A session that is not ours, or names another account, credits nothing.
    const stranger = await createTestAccount(app.deps.sql);
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.completed', paidSession(stranger, topUpId, 99_900))).outcome).toBe('unknown top-up');
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
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.completed', paidSession(account, topUpId, 1000, { payment_status: 'unpaid' }))).outcome).toBe('awaiting payment');
    expect(await balanceOf(account)).toBe(0);
    expect(expectOk<{ outcome: string }>(await deliver('checkout.session.async_payment_succeeded', paidSession(account, topUpId, 1000))).outcome).toBe('credited');
    expect(await balanceOf(account)).toBe(10);
  });

  it('a refund takes back what was credited, below zero if it was spent, and calls get 402 until the balance is positive', async () => {
    const account = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(account, 5);
    expectOk(await deliver('checkout.session.completed', paidSession(account, topUpId, 500)));
    for (let i = 0; i < 2; i += 1) expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) }));
    expect(await balanceOf(account)).toBe(4.98);
    const charge = { id: `ch_${topUpId}`, object: 'charge', payment_intent: `pi_for_${topUpId}`, amount: 500, amount_refunded: 300 };
    expect(expectOk<{ outcome: string }>(await deliver('charge.refunded', charge)).outcome).toBe('refund applied');
    expect(await balanceOf(account)).toBe(1.98);
    // The rest refunded later (cumulative amount_refunded), and that event delivered twice.
    const full = { ...charge, amount_refunded: 500 };
    expectOk(await deliver('charge.refunded', full, { id: `evt_full_refund_${topUpId}` }));
    expectOk(await deliver('charge.refunded', full, { id: `evt_full_refund_${topUpId}` }));
    expect(await balanceOf(account)).toBe(-0.02);
    const refused = expectError(await app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) }), 402, 'insufficient_balance');
    expect(refused.balance).toBe(-0.02);
    await ledgerMatches(account);
  });

  it('a refund that arrives before the payment is applied when the payment is credited; a dispute takes back the disputed amount', async () => {
    const early = await createTestAccount(app.deps.sql);
    const { topUpId } = await startTopUp(early, 30);
    expectOk(await deliver('charge.refunded', { id: `ch_${topUpId}`, object: 'charge', payment_intent: `pi_for_${topUpId}`, amount: 3000, amount_refunded: 3000 }));
    expect(await balanceOf(early)).toBe(0);
    expectOk(await deliver('checkout.session.completed', paidSession(early, topUpId, 3000)));
    expect(await balanceOf(early)).toBe(0);
    const kinds = await app.deps.sql<{ kind: string; amount_micros: bigint }[]>`select kind, amount_micros from ledger_entries where account_id = ${early.accountId} order by seq`;
    expect(kinds.map((k) => [k.kind, k.amount_micros])).toEqual([
      ['topup', 30_000_000n],
      ['clawback', -30_000_000n],
    ]);

    const disputed = await createTestAccount(app.deps.sql);
    const second = await startTopUp(disputed, 50);
    expectOk(await deliver('checkout.session.completed', paidSession(disputed, second.topUpId, 5000)));
    expect(expectOk<{ outcome: string }>(await deliver('charge.dispute.created', { id: `dp_${second.topUpId}`, object: 'dispute', payment_intent: `pi_for_${second.topUpId}`, amount: 5000 })).outcome).toBe('dispute applied');
    expect(await balanceOf(disputed)).toBe(0);
    await ledgerMatches(early);
    await ledgerMatches(disputed);
  });

  it('acknowledges event types it does not handle, and answers 404 where Stripe is not configured', async () => {
    expect(expectOk<{ outcome: string }>(await deliver('customer.created', { id: 'cus_1', object: 'customer' })).outcome).toBe('ignored');
    const sandbox = await createTestApp();
    try {
      const res = await sandbox.inject({ method: 'POST', url: '/api/webhooks/stripe', headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=x' }, payload: '{}' });
      expectError(res, 404, 'not_found');
    } finally {
      await sandbox.close();
    }
  });
});
