import {
  accountBalance,
  autoTopupSettings,
  billingMode,
  changeLowBalanceThreshold,
  configureAutoTopup,
  createStripe,
  lowBalanceThreshold,
  settleBalanceAlertState,
  startAutoTopupSetup,
  startCheckout,
  topUp,
  type AutoTopupRow,
} from '#core/billing';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses } from './error-responses.js';
import { emitAfterChange } from './webhooks.js';
import { PlatformError } from '#core/platform';
import { assertEmailVerified } from '#core/identity';
import { formatDollars, MICROS_PER_DOLLAR, parseDollars, toDollars } from '#contracts/money';
import { requireAuth } from '../plugins/auth.js';
import { IDEMPOTENCY_KEY } from '../http/idempotency-key.js';
import { operation, restDoor } from '../http/operation.js';

const balanceResponse = z.object({ ok: z.literal(true), balance: z.number() });
const topUpResponse = z.object({ ok: z.literal(true), balance: z.number(), credited: z.number() });

const alertsResponse = z.object({
  ok: z.literal(true),
  lowBalanceThreshold: z.number().nullable().describe('Dollars; null: no balance.low events'),
});

/** GET /balance and the get_balance tool. */
export const readBalance = operation({}, async (app, door) => ({
  ok: true as const,
  balance: toDollars(await accountBalance(app.deps.sql, door.caller.accountId)),
}));

const checkoutResponse = z.object({
  ok: z.literal(true),
  checkoutUrl: z.string().describe("Stripe's payment page: send the person there"),
  topUpId: z.string(),
});

const balanceRoutes: FastifyPluginAsyncZod = async (app) => {
  const stripe = createStripe(app.deps.settings);
  app.get(
    '/balance/alerts',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary: 'The low-balance threshold: a balance.low webhook event when a charge takes the balance below it',
        response: { 200: alertsResponse, ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => {
      const threshold = await lowBalanceThreshold(request.server.deps.sql, requireAuth(request).accountId);
      return { ok: true as const, lowBalanceThreshold: threshold === null ? null : toDollars(threshold) };
    },
  );

  app.put(
    '/balance/alerts',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary: 'Set the low-balance threshold (dollars), or null for none',
        description:
          'balance.low is sent once per crossing: when a charge takes the balance from at or above the threshold to below it; a top-up that lifts the balance back above re-arms it. balance.depleted is sent when the balance reaches zero or a call is refused for want of funds. Both are webhook events (POST /webhooks).',
        body: z
          .object({ lowBalanceThreshold: z.union([z.number(), z.string()]).nullable().describe('Dollars, e.g. 2 or "0.50"; null turns it off') })
          .strict(),
        response: { 200: alertsResponse, ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const micros = await changeLowBalanceThreshold(request.server.deps.sql, auth.accountId, request.body.lowBalanceThreshold);
      app.balanceAlerts.forget(auth.accountId);
      return { ok: true as const, lowBalanceThreshold: micros === null ? null : toDollars(micros) };
    },
  );

  const autoTopupSchema = z.object({
    ok: z.literal(true),
    enabled: z.boolean(),
    threshold: z.number().nullable().describe('Dollars: when a charge leaves the balance below this...'),
    amount: z.number().nullable().describe('...add this many dollars'),
    cardSaved: z.boolean().describe('A payment method is saved (POST /balance/auto-topup/setup)'),
    inFlight: z.boolean(),
    failures: z.number().int().describe('Failed attempts in a row; the next waits 1 h, doubling, at most a day'),
    retryAfter: z.string().nullable(),
    lastError: z.string().nullable(),
    available: z
      .boolean()
      .describe(
        'Whether this deployment can charge a card (live billing with Stripe configured); when false, saving a card and turning auto top-up on answer 403 live_billing',
      ),
  });
  const autoTopupView = (row: AutoTopupRow) => ({
    ok: true as const,
    enabled: row.auto_topup_enabled,
    threshold: row.auto_topup_threshold_micros === null ? null : toDollars(row.auto_topup_threshold_micros),
    amount: row.auto_topup_amount_micros === null ? null : toDollars(row.auto_topup_amount_micros),
    cardSaved: row.auto_topup_payment_method !== null,
    inFlight: row.auto_topup_in_flight_since !== null,
    failures: row.auto_topup_failures,
    retryAfter: row.auto_topup_retry_after?.toISOString() ?? null,
    lastError: row.auto_topup_last_error,
    available: stripe !== null && billingMode(app.deps.settings) === 'live',
  });
  const requireStripe = () => {
    if (!stripe || billingMode(app.deps.settings) !== 'live') {
      throw new PlatformError('live_billing', 'Auto top-up needs live billing with Stripe configured', {
        hint: 'The operator sets BILLING_MODE=live and STRIPE_SECRET_KEY.',
      });
    }
    return stripe;
  };

  app.get(
    '/balance/auto-topup',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary: 'Auto top-up: its settings and state',
        response: { 200: autoTopupSchema, ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => {
      return autoTopupView(await autoTopupSettings(app.deps.sql, requireAuth(request).accountId));
    },
  );

  app.put(
    '/balance/auto-topup',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary:
          'Set auto top-up: when a charge leaves the balance below `threshold`, charge the saved card `amount` (off-session, from a queue job)',
        description:
          "Needs live billing and a saved card (POST /balance/auto-topup/setup). At most one attempt is in flight per account; the balance is credited by Stripe's webhook; a declined attempt sends topup.failed (webhook and e-mail) and waits before the next.",
        body: z.object({ enabled: z.boolean(), threshold: z.union([z.number(), z.string()]), amount: z.union([z.number(), z.string()]) }).strict(),
        response: { 200: autoTopupSchema, ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request) => {
      requireStripe();
      const auth = requireAuth(request);
      if (request.body.enabled) await assertEmailVerified(app.deps.sql, app.deps.settings, auth.accountId, 'turn on auto top-up');
      const row = await configureAutoTopup(app.deps.sql, app.deps.settings, auth.accountId, request.body);
      app.balanceAlerts.forget(auth.accountId);
      return autoTopupView(row);
    },
  );

  app.post(
    '/balance/auto-topup/setup',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary: "Save a card for auto top-up: answers a Stripe Checkout page in setup mode; Stripe's webhook saves the card",
        response: { 200: z.object({ ok: z.literal(true), checkoutUrl: z.string() }), ...errorResponses(401, 403, 429, 503) },
      },
    },
    async (request) => {
      const stripeClient = requireStripe();
      const auth = requireAuth(request);
      await assertEmailVerified(app.deps.sql, app.deps.settings, auth.accountId, 'save a card for auto top-up');
      const started = await startAutoTopupSetup(app.deps.sql, stripeClient, app.deps.settings, auth.accountId);
      return { ok: true as const, ...started };
    },
  );

  app.get(
    '/balance',
    {
      config: { auth: 'key' },
      schema: { tags: ['balance'], summary: 'Current prepaid balance in dollars', response: { 200: balanceResponse } },
    },
    async (request, reply) => readBalance.run(app, restDoor(request, reply), request),
  );

  app.post(
    '/balance',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['balance'],
        summary:
          'Add funds: credited at once in sandbox billing mode; in live mode, a Stripe Checkout page to pay on (credited when Stripe confirms the payment)',
        description:
          "Sandbox: answers the new balance. Live (BILLING_MODE=live with Stripe configured): answers { ok, checkoutUrl, topUpId }; send the person to checkoutUrl; the balance is credited by Stripe's webhook with the amount paid (TOPUP_MIN_DOLLARS to TOPUP_MAX_DOLLARS, two decimals). Both honor an Idempotency-Key header.",
        body: z.object({ amount: z.union([z.number(), z.string()]).describe('Dollars, e.g. 5 or "12.50"; at most six decimals') }),
        // 409: over the sandbox balance cap, or an Idempotency-Key reused with another amount.
        response: { 200: z.union([topUpResponse, checkoutResponse]), ...errorResponses(400, 403, 409, 503) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const { settings, sql } = request.server.deps;
      await assertEmailVerified(sql, settings, auth.accountId, 'add funds');
      if (billingMode(settings) === 'live' && stripe) {
        const amountMicros = parseDollars(request.body.amount);
        if (amountMicros === null || amountMicros === 0n) {
          throw new PlatformError('validation_failed', 'amount must be a positive dollar amount', { hint: 'For example {"amount": 20}.' });
        }
        const idempotency = request.headers['idempotency-key'];
        const key = typeof idempotency === 'string' && IDEMPOTENCY_KEY.test(idempotency) ? idempotency : null;
        const started = await startCheckout(sql, stripe, settings, { accountId: auth.accountId, amountMicros, idempotencyKey: key });
        request.log.info({ topUpId: started.topUpId }, 'top-up checkout started');
        return { ok: true as const, ...started };
      }
      if (billingMode(settings) === 'live') {
        throw new PlatformError('live_billing', 'Top-ups through the API are disabled in live billing mode', {
          hint:
            settings.NODE_ENV === 'production' && settings.BILLING_MODE === 'sandbox'
              ? 'Sandbox top-ups are off in production unless the operator sets ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION=true.'
              : 'Live billing takes a real payment through Stripe, which this deployment has not configured (STRIPE_SECRET_KEY); or pay per call with x402.',
        });
      }
      const header = request.headers['idempotency-key'];
      const idempotencyKey = header === undefined ? null : Array.isArray(header) ? '' : header;
      if (idempotencyKey !== null && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
        throw new PlatformError('validation_failed', 'Idempotency-Key must be 1 to 200 visible ASCII characters', { hint: 'A UUID works well.' });
      }
      const amountMicros = parseDollars(request.body.amount);
      if (amountMicros === null || amountMicros === 0n) {
        throw new PlatformError('validation_failed', 'amount must be a positive dollar amount with at most six decimal places', {
          hint: 'For example {"amount": 5} or {"amount": "12.50"}.',
        });
      }
      const capMicros = BigInt(settings.SANDBOX_BALANCE_CAP_DOLLARS) * MICROS_PER_DOLLAR;
      if (amountMicros > capMicros) {
        throw new PlatformError('validation_failed', `amount is above the sandbox cap of $${formatDollars(capMicros)}`, {
          hint: `Top up at most $${formatDollars(capMicros)} in total.`,
        });
      }
      const result = await topUp(sql, { accountId: auth.accountId, amountMicros, capMicros, idempotencyKey });
      if (result.ok) {
        if (result.replayed) reply.header('Idempotent-Replayed', 'true');
        else {
          request.server.metrics.money('credited', result.creditedMicros);
          await settleBalanceAlertState(sql, auth.accountId);
        }
        if (!result.replayed)
          await emitAfterChange(request.server, auth.accountId, 'topup.succeeded', {
            amount: toDollars(result.creditedMicros),
            balance: toDollars(result.balanceMicros),
            mode: 'sandbox',
          });
        return { ok: true as const, balance: toDollars(result.balanceMicros), credited: toDollars(result.creditedMicros) };
      }
      switch (result.reason) {
        case 'cap_exceeded': {
          const room = result.capMicros - result.balanceMicros;
          throw new PlatformError('balance_cap_exceeded', `A sandbox balance may not exceed $${formatDollars(result.capMicros)}`, {
            hint: room > 0n ? `You can add at most $${formatDollars(room)} now.` : 'Spend some of the balance before topping up again.',
            details: { balance: toDollars(result.balanceMicros), cap: toDollars(result.capMicros) },
          });
        }
        case 'idempotency_conflict':
          throw new PlatformError('idempotency_conflict', 'This Idempotency-Key was already used with a different amount', {
            hint: `It credited $${formatDollars(result.creditedMicros)}; use a new key for a new top-up.`,
          });
        case 'no_account':
          throw new PlatformError('not_found', 'Account not found');
      }
    },
  );
};

export default balanceRoutes;
