import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import pino from 'pino';
import Stripe from 'stripe';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { createRedis } from '#core/platform';
import { autoTopupProcessor } from '#workers/queues/auto-topup';
import { loadWorkerSettings } from '#workers/settings';
import {
  type RunningBrowser,
  docScreenshot,
  freePort,
  launchBrowser,
  refreshUntil,
  screenshotOnFailure,
  signUpInBrowser,
  expectNoScriptErrors,
  asNewOwner,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus } from '../helpers/edge-client.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';

const WEBHOOK_SECRET = 'whsec_e2e_billing_secret';
const STRIPE_KEY = 'sk_test_e2e_local_server';

interface StripeRequest {
  method: string;
  path: string;
  form: URLSearchParams;
  headers: IncomingHttpHeaders;
}

interface FakeSession {
  id: string;
  mode: 'payment' | 'setup';
  successUrl: string;
  cancelUrl: string;
  amountCents: number | null;
  currency: string | null;
  setupIntent: string | null;
}

const escapeHtml = (value: string) => value.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/**
 * Billing on the dashboard's overview in a real browser (Debian's Chromium via playwright-core)
 * against a real listening edge in live billing mode, Postgres, Redis, and a local Stripe-shaped
 * HTTP server this file runs: the official `stripe` package is pointed at it (STRIPE_API_URL), it
 * records the requests and answers Stripe-shaped objects, and it also serves the "Checkout" pages the
 * sessions' urls name, whose buttons redirect to the session's success_url or cancel_url. So the
 * browser really leaves for "Stripe" and comes back. Webhooks are signed with the package's
 * generateTestHeaderString, as Stripe would sign them. An auto top-up attempt runs on a BullMQ
 * worker of this file's own, with the real processor. Steps share one page and run in order.
 */
describe('billing in a browser (live mode with Stripe)', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const redisPrefix = uniqueId('bille2e');
  const email = `${uniqueId('payer')}@example.test`;
  const password = 'correct horse battery staple';
  let app: FastifyInstance;
  let base: string;
  let stripeServer: Server;
  let stripeUrl: string;
  let workerRedis: Redis;
  let worker: Worker;
  let browser: RunningBrowser;
  let page: Page;
  let ownerKey = '';
  let accountId = '';
  /** The paid top-up: its Checkout Session and top-up id, for the refund at the end. */
  let paid = { sessionId: '', topUpId: '' };
  const requests: StripeRequest[] = [];
  const sessions = new Map<string, FakeSession>();
  /** What the fake Checkout pages were asked: `${sessionId} pay|cancel`. */
  const checkoutClicks: string[] = [];
  let sessionCount = 0;
  const signer = new Stripe('sk_test_signer_only');
  let eventCount = 0;

  /** JSON calls with the owner's key. */
  const call = edgeClient(
    () => base,
    () => ownerKey,
  );
  /** Sends a Stripe event to the edge's webhook route, signed with the endpoint's secret. */
  const deliver = async (type: string, object: Record<string, unknown>) => {
    eventCount += 1;
    const payload = JSON.stringify({
      id: `evt_e2e_${eventCount}_${Date.now()}`,
      object: 'event',
      type,
      api_version: '2025-01-01',
      created: Math.floor(Date.now() / 1000),
      data: { object },
    });
    const signature = signer.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
    const res = await fetch(`${base}/api/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    return (JSON.parse(text) as { outcome: string }).outcome;
  };
  const sessionRequests = (mode: 'payment' | 'setup') =>
    requests.filter((r) => r.method === 'POST' && r.path === '/v1/checkout/sessions' && r.form.get('mode') === mode);
  const onCheckoutPage = (url: URL) => url.origin === stripeUrl && url.pathname.startsWith('/pay/');
  const backOnDashboard = (url: URL) => url.origin === base;
  const autoTopupCard = () => page.locator('section.card').filter({ has: page.getByRole('heading', { name: 'Automatic top-up' }) });
  beforeAll(async () => {
    stripeServer = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        const path = req.url ?? '/';
        requests.push({ method: req.method ?? '', path, form, headers: req.headers });
        const json = (status: number, answer: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${requests.length}` });
          res.end(JSON.stringify(answer));
        };
        if (req.method === 'POST' && path === '/v1/customers') {
          return json(200, {
            id: `cus_e2e_${requests.length}`,
            object: 'customer',
            email: form.get('email'),
            metadata: { accountId: form.get('metadata[accountId]') },
          });
        }
        if (req.method === 'GET' && path.startsWith('/v1/setup_intents/')) {
          const id = path.slice('/v1/setup_intents/'.length);
          return json(200, { id, object: 'setup_intent', status: 'succeeded', payment_method: `pm_for_${id}` });
        }
        if (req.method === 'POST' && path === '/v1/payment_intents') {
          // The saved card declines every off-session charge.
          return json(402, {
            error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds', message: 'Your card was declined.' },
          });
        }
        if (req.method === 'POST' && path === '/v1/checkout/sessions') {
          sessionCount += 1;
          const mode = form.get('mode') === 'setup' ? 'setup' : 'payment';
          const id = mode === 'setup' ? `cs_setup_e2e_${sessionCount}` : `cs_test_e2e_${sessionCount}`;
          const session: FakeSession = {
            id,
            mode,
            successUrl: String(form.get('success_url')),
            cancelUrl: String(form.get('cancel_url')),
            amountCents: mode === 'payment' ? Number(form.get('line_items[0][price_data][unit_amount]')) : null,
            currency: form.get('line_items[0][price_data][currency]') ?? form.get('currency'),
            setupIntent: mode === 'setup' ? `seti_e2e_${sessionCount}` : null,
          };
          sessions.set(id, session);
          return json(200, {
            id,
            object: 'checkout.session',
            mode,
            status: 'open',
            payment_status: mode === 'payment' ? 'unpaid' : 'no_payment_required',
            url: `${stripeUrl}/pay/${id}`,
            amount_total: session.amountCents,
            currency: session.currency,
            customer: form.get('customer'),
            setup_intent: session.setupIntent,
            client_reference_id: form.get('client_reference_id'),
            metadata: { topUpId: form.get('metadata[topUpId]'), accountId: form.get('metadata[accountId]'), purpose: form.get('metadata[purpose]') },
          });
        }
        // The hosted "Checkout" page and its two buttons.
        const page = /^\/pay\/([\w-]+)(?:\/(pay|cancel))?$/.exec(path);
        const session = page ? sessions.get(page[1]!) : undefined;
        if (page && session && req.method === 'GET' && !page[2]) {
          const what = session.mode === 'setup' ? 'Save a card for later payments' : `Pay $${((session.amountCents ?? 0) / 100).toFixed(2)}`;
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Fake Stripe Checkout</title></head><body>
<h1>Fake Stripe Checkout</h1><p>${escapeHtml(what)}</p>
<form method="post" action="/pay/${session.id}/pay"><button type="submit">${session.mode === 'setup' ? 'Save card' : 'Pay'}</button></form>
<form method="post" action="/pay/${session.id}/cancel"><button type="submit">Cancel</button></form>
</body></html>`);
          return;
        }
        if (page && session && req.method === 'POST' && page[2]) {
          checkoutClicks.push(`${session.id} ${page[2]}`);
          res.writeHead(303, { location: page[2] === 'pay' ? session.successUrl : session.cancelUrl });
          res.end();
          return;
        }
        json(404, { error: { type: 'invalid_request_error', message: `no route ${req.method} ${path}` } });
      });
    });
    await new Promise<void>((resolve) => stripeServer.listen(0, '127.0.0.1', resolve));
    stripeUrl = `http://127.0.0.1:${(stripeServer.address() as AddressInfo).port}`;

    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(
      testEdgeSettings({
        PORT: String(port),
        PUBLIC_URL: base,
        REDIS_PREFIX: redisPrefix,
        BILLING_MODE: 'live',
        STRIPE_SECRET_KEY: STRIPE_KEY,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_URL: stripeUrl,
        // No sign-up credit: the balance is what Stripe's webhooks credited, less what was spent.
        SIGNUP_CREDIT_DOLLARS: '0',
      }),
    );
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const settings = loadWorkerSettings({
      ...process.env,
      DATABASE_URL: testDatabaseUrl(),
      REDIS_PREFIX: redisPrefix,
      STRIPE_SECRET_KEY: STRIPE_KEY,
      STRIPE_API_URL: stripeUrl,
    });
    const processor = autoTopupProcessor({ sql: app.deps.sql, redis: workerRedis, settings, log: pino({ level: 'silent' }) });
    worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix: redisPrefix, concurrency: 1 });
    worker.on('error', () => {});
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await worker?.close();
    await workerRedis?.quit();
    await new Promise<void>((resolve) => (stripeServer ? stripeServer.close(() => resolve()) : resolve()));
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `billing-${task.name}`));
  });

  it("adds $20: the browser goes to Stripe's page and back, and the balance updates when the webhook arrives, without a reload", async () => {
    ownerKey = await signUpInBrowser(page, base, email, password);
    expect(ownerKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    await page.getByTestId('balance').filter({ hasText: '$0.00' }).waitFor();
    const [account] = await app.deps.sql<{ id: string }[]>`select id from accounts where email = ${email}`;
    accountId = account!.id;

    await page.getByLabel('Amount in dollars').fill('20');
    await page.getByRole('button', { name: 'Add funds' }).click();
    await page.waitForURL(onCheckoutPage);
    await page.getByRole('heading', { name: 'Fake Stripe Checkout' }).waitFor();
    await page.getByText('Pay $20.00').waitFor();

    // The edge asked Stripe for a Checkout Session in payment mode for 2000 cents, with the
    // dashboard's per-click Idempotency-Key, coming back to the dashboard.
    const [request] = sessionRequests('payment');
    expect(sessionRequests('payment')).toHaveLength(1);
    expect(request!.headers.authorization).toBe(`Bearer ${STRIPE_KEY}`);
    expect(Object.fromEntries(request!.form)).toMatchObject({
      mode: 'payment',
      client_reference_id: accountId,
      'line_items[0][price_data][unit_amount]': '2000',
      'line_items[0][price_data][currency]': 'usd',
      'line_items[0][quantity]': '1',
      'metadata[accountId]': accountId,
    });
    const topUpId = request!.form.get('metadata[topUpId]')!;
    expect(topUpId).toMatch(/^top_/);
    expect(request!.form.get('success_url')).toBe(`${base}/?topup=succeeded&topUpId=${topUpId}`);
    expect(String(request!.headers['idempotency-key'])).toMatch(new RegExp(`^topup:${accountId}:[0-9a-f-]{36}$`));
    const sessionId = new URL(page.url()).pathname.slice('/pay/'.length);
    expect(sessions.get(sessionId)?.mode).toBe('payment');
    paid = { sessionId, topUpId };
    // Nothing is credited by starting a payment.
    expect((await call('/api/v1/balance')).body.balance).toBe(0);

    await page.getByRole('button', { name: 'Pay' }).click();
    await page.waitForURL(backOnDashboard);
    const waiting = page.getByRole('status').filter({ hasText: 'Payment received by Stripe; your balance updates when Stripe confirms it' });
    await waiting.waitFor();
    expect(checkoutClicks).toEqual([`${sessionId} pay`]);
    // Stripe's query is taken off the address once read.
    await expect.poll(() => new URL(page.url()).search).toBe('');
    await expect(page.getByTestId('balance').textContent()).resolves.toBe('$0.00');

    // A marker on the window: it survives only if the page is never reloaded.
    await page.evaluate(() => Object.assign(globalThis, { e2eMarker: 'not reloaded' }));
    const outcome = await deliver('checkout.session.completed', {
      id: sessionId,
      object: 'checkout.session',
      mode: 'payment',
      payment_status: 'paid',
      status: 'complete',
      amount_total: 2000,
      currency: 'usd',
      client_reference_id: accountId,
      payment_intent: `pi_for_${topUpId}`,
      metadata: { topUpId, accountId },
    });
    expect(outcome).toBe('credited');
    await page.getByTestId('balance').filter({ hasText: '$20.00' }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Stripe confirmed the payment of $20.00: your balance is now $20.00.' }).waitFor();
    await expect(page.evaluate(() => (globalThis as { e2eMarker?: string }).e2eMarker)).resolves.toBe('not reloaded');
    expect((await call('/api/v1/balance')).body.balance).toBe(20);
    await expect(page.getByText("You pay by card on Stripe's page").isVisible()).resolves.toBe(true);

    await page.getByRole('button', { name: 'Dismiss' }).click();
    await expect(page.getByText('Stripe confirmed the payment').count()).resolves.toBe(0);
  });

  it("cancelling on Stripe's page comes back saying nothing was charged", async () => {
    await page.getByLabel('Amount in dollars').fill('7.50');
    await page.getByRole('button', { name: 'Add funds' }).click();
    await page.waitForURL(onCheckoutPage);
    const [, request] = sessionRequests('payment');
    expect(request!.form.get('line_items[0][price_data][unit_amount]')).toBe('750');
    const topUpId = request!.form.get('metadata[topUpId]')!;
    expect(request!.form.get('cancel_url')).toBe(`${base}/?topup=cancelled&topUpId=${topUpId}`);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.waitForURL(backOnDashboard);
    await page.getByRole('status').filter({ hasText: 'Payment cancelled' }).filter({ hasText: 'nothing was charged' }).waitFor();
    await expect.poll(() => new URL(page.url()).search).toBe('');
    await page.getByTestId('balance').filter({ hasText: '$20.00' }).waitFor();
    expect((await call('/api/v1/balance')).body.balance).toBe(20);
    expect(checkoutClicks.at(-1)).toMatch(/ cancel$/);

    // The edge's rules for card amounts come back in words: below the minimum is refused before Stripe is asked.
    const asked = sessionRequests('payment').length;
    await page.getByLabel('Amount in dollars').fill('2');
    await page.getByRole('button', { name: 'Add funds' }).click();
    await page.getByRole('alert').filter({ hasText: 'amount must be between' }).waitFor();
    expect(new URL(page.url()).origin).toBe(base);
    expect(sessionRequests('payment')).toHaveLength(asked);
  });

  it('sets the low-balance alert threshold, explains balance.low, and turns it off', async () => {
    const alertCard = page.locator('section.card').filter({ has: page.getByRole('heading', { name: 'Low-balance alert' }) });
    await expect(alertCard.getByText('balance.low', { exact: true }).isVisible()).resolves.toBe(true);
    await expect(alertCard.getByRole('link', { name: 'Webhooks page' }).getAttribute('href')).resolves.toBe('/webhooks');
    const threshold = page.getByLabel('Low-balance threshold in dollars');
    await expect(threshold.inputValue()).resolves.toBe('');

    await threshold.fill('0');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await alertCard.getByRole('alert').filter({ hasText: 'lowBalanceThreshold must be a positive dollar amount' }).waitFor();

    await threshold.fill('2.50');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await alertCard.getByText('Saved: you are alerted when your balance falls below $2.50.').waitFor();
    let saved = await call('/api/v1/balance/alerts');
    expectStatus(saved, 200);
    expect(saved.body.lowBalanceThreshold).toBe(2.5);

    await threshold.fill('');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await alertCard.getByText('Low-balance alert turned off.').waitFor();
    expect((await call('/api/v1/balance/alerts')).body.lowBalanceThreshold).toBeNull();

    await threshold.fill('3');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await alertCard.getByText('below $3.00').waitFor();
    saved = await call('/api/v1/balance/alerts');
    expect(saved.body.lowBalanceThreshold).toBe(3);
    // A reload shows the saved threshold.
    await page.reload();
    await expect.poll(() => page.getByLabel('Low-balance threshold in dollars').inputValue()).toBe('3');
  });

  it('saves a card through Stripe in setup mode and sets automatic top-up', async () => {
    const card = autoTopupCard();
    const state = card.getByTestId('auto-topup-state');
    await state.getByText('No card saved').waitFor();
    await expect(state.getByText('Off', { exact: true }).isVisible()).resolves.toBe(true);

    await card.getByRole('button', { name: 'Save a card' }).click();
    await page.waitForURL(onCheckoutPage);
    await page.getByText('Save a card for later payments').waitFor();
    const [setup] = sessionRequests('setup');
    expect(sessionRequests('setup')).toHaveLength(1);
    const customer = setup!.form.get('customer')!;
    expect(customer).toMatch(/^cus_e2e_/);
    expect(requests.filter((r) => r.path === '/v1/customers')[0]!.form.get('metadata[accountId]')).toBe(accountId);
    expect(Object.fromEntries(setup!.form)).toMatchObject({
      mode: 'setup',
      currency: 'usd',
      'metadata[accountId]': accountId,
      'metadata[purpose]': 'auto-topup-setup',
      success_url: `${base}/?autotopup=saved`,
      cancel_url: `${base}/?autotopup=cancelled`,
    });
    const setupSession = sessions.get(new URL(page.url()).pathname.slice('/pay/'.length))!;
    expect(setupSession.mode).toBe('setup');

    await page.getByRole('button', { name: 'Save card' }).click();
    await page.waitForURL(backOnDashboard);
    await page.getByRole('status').filter({ hasText: 'Card details received by Stripe' }).waitFor();
    await expect.poll(() => new URL(page.url()).search).toBe('');
    // Back from Stripe, the card is not saved until Stripe's webhook says so.
    await state.getByText('No card saved').waitFor();

    const outcome = await deliver('checkout.session.completed', {
      id: setupSession.id,
      object: 'checkout.session',
      mode: 'setup',
      status: 'complete',
      customer,
      setup_intent: setupSession.setupIntent,
      metadata: { accountId, purpose: 'auto-topup-setup' },
    });
    expect(outcome).toBe('card saved');
    // The page notices by itself (it asks again every two seconds while waiting).
    await state.getByText('Card saved', { exact: true }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Stripe confirmed your card' }).waitFor();
    expect(requests.some((r) => r.method === 'GET' && r.path === `/v1/setup_intents/${setupSession.setupIntent}`)).toBe(true);
    await expect(card.getByRole('button', { name: 'Replace the saved card' }).isVisible()).resolves.toBe(true);

    await card.getByLabel('Top up automatically').check();
    await card.getByLabel('When the balance falls below (dollars)').fill('5');
    // An amount under the minimum card payment is refused in words.
    await card.getByLabel('Add this amount (dollars)').fill('2');
    await card.getByRole('button', { name: 'Save automatic top-up' }).click();
    await card.getByRole('alert').filter({ hasText: 'amount must be between' }).waitFor();
    expect((await call('/api/v1/balance/auto-topup')).body.enabled).toBe(false);

    await card.getByLabel('Add this amount (dollars)').fill('20');
    await card.getByRole('button', { name: 'Save automatic top-up' }).click();
    await card.getByText('Automatic top-up is on: below $5.00, $20.00 is charged to your card.').waitFor();
    await state.getByText('On', { exact: true }).waitFor();
    await state.getByText('Below $5.00, add $20.00').waitFor();
    const saved = await call('/api/v1/balance/auto-topup');
    expectStatus(saved, 200);
    expect(saved.body).toMatchObject({ ok: true, enabled: true, threshold: 5, amount: 20, cardSaved: true, inFlight: false, failures: 0 });

    await page.getByRole('button', { name: 'Dismiss' }).click();
    await page.evaluate('window.scrollTo(0, 0)');
    await docScreenshot(page, 'billing');
  });

  it('shows a declined automatic top-up: the error and when the next attempt may happen', async () => {
    const card = autoTopupCard();
    // Above the balance, so the next charge leaves the balance below it.
    await card.getByLabel('When the balance falls below (dollars)').fill('25');
    await card.getByRole('button', { name: 'Save automatic top-up' }).click();
    await card.getByText('Automatic top-up is on: below $25.00').waitFor();

    // An agent buys an API's instructions ($0.01): 20.00 -> 19.99, below $25; the worker charges the card, which declines.
    const bought = await call('/api/v1/apis/twilio.com-api/instructions');
    expectStatus(bought, 200);
    const failure = card.getByTestId('auto-topup-failure');
    await refreshUntil(() => autoTopupCard().getByRole('button', { name: 'Refresh', exact: true }), failure);
    await expect(failure.textContent()).resolves.toContain('The last automatic top-up failed: card_declined: Your card was declined. ');
    await expect(failure.textContent()).resolves.toMatch(/The next attempt may happen in (1 hour|60 minutes)/);
    const state = await call('/api/v1/balance/auto-topup');
    expect(state.body).toMatchObject({ failures: 1, inFlight: false, lastError: expect.stringContaining('card_declined') });
    const intent = requests.find((r) => r.path === '/v1/payment_intents')!;
    expect(Object.fromEntries(intent.form)).toMatchObject({ amount: '2000', currency: 'usd', off_session: 'true', 'metadata[accountId]': accountId });
    expect((await call('/api/v1/balance')).body.balance).toBe(19.99);
  });

  it('a refund taken back below zero shows the negative balance and what to do', async () => {
    const outcome = await deliver('charge.refunded', {
      id: `ch_${paid.topUpId}`,
      object: 'charge',
      payment_intent: `pi_for_${paid.topUpId}`,
      amount: 2000,
      amount_refunded: 2000,
    });
    expect(outcome).toBe('refund applied');
    expect((await call('/api/v1/balance')).body.balance).toBe(-0.01);
    await page.reload();
    const balance = page.getByTestId('balance');
    await balance.filter({ hasText: '-$0.01' }).waitFor();
    await expect(balance.getAttribute('class')).resolves.toContain('stat-negative');
    await expect(page.getByTestId('negative-balance').textContent()).resolves.toContain(
      '-$0.01 — a refunded or disputed payment was taken back. Add funds to keep calling APIs',
    );
  });

  it('ran without a script error in any page', async () => {
    await expectNoScriptErrors(browser, asNewOwner(base, ['Overview']));
  });
});

/**
 * Live billing without Stripe configured: POST /balance and the auto top-up writes answer 403
 * live_billing, GET /balance/auto-topup says `available: false`, and the overview says so in a
 * person's words (no setting named) instead of offering what cannot work.
 */
describe('billing in a browser (live mode without Stripe)', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  let app: FastifyInstance;
  let base: string;
  let browser: RunningBrowser;
  let page: Page;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(
      testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: uniqueId('billnostripe'), BILLING_MODE: 'live', STRIPE_SECRET_KEY: '' }),
    );
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `billing-no-stripe-${task.name}`));
  });

  it('says plainly that cards are not taken: auto top-up has no controls, Add funds explains its refusal, and no setting is named', async () => {
    await signUpInBrowser(page, base, `${uniqueId('nostripe')}@example.test`, 'correct horse battery staple');

    const card = page.locator('section.card').filter({ has: page.getByRole('heading', { name: 'Automatic top-up' }) });
    // The server says cards cannot be charged here: the card says so before anyone tries, and offers nothing that would refuse.
    await card
      .getByTestId('auto-topup-unavailable')
      .getByText('Automatic top-up is not available here: this service does not take card payments')
      .waitFor();
    await expect(card.getByRole('button', { name: 'Save a card' }).count()).resolves.toBe(0);
    await expect(card.getByRole('button', { name: 'Save automatic top-up' }).count()).resolves.toBe(0);
    expect(new URL(page.url()).origin).toBe(base);

    await page.getByLabel('Amount in dollars').fill('5');
    await page.getByRole('button', { name: 'Add funds' }).click();
    const warning = page.getByRole('alert').filter({ hasText: 'Card payments are not switched on for this service' });
    await warning.waitFor();
    await expect(page.getByTestId('balance').textContent()).resolves.toBe('$1.00');
    const words = (await page.locator('main').textContent()) ?? '';
    expect(words).not.toMatch(/BILLING_MODE|STRIPE_SECRET_KEY|live billing mode/);

    await page.reload();
    await card.getByTestId('auto-topup-unavailable').waitFor();
    await expect(card.getByRole('button', { name: 'Save a card' }).count()).resolves.toBe(0);
    expect(browser.pageErrors).toEqual([]);
  });
});
