import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { formatDollars } from '#contracts/money';
import type { Db, Sql } from '#db/sql';
import {
  applyPaymentAdjustment,
  creditPaidCheckout,
  failTopup,
  findTopupByIdempotencyKey,
  insertTopup,
  recordStripeEvent,
  setTopupCheckoutSession,
} from '#db/topups';
import { finishAutoTopup, saveAutoTopupPaymentMethod } from '#db/auto-topup';

/** Micro-units per minor unit (cent) of a two-decimal currency. */
export const MICROS_PER_MINOR = 10_000n;

/** Stripe settings of the edge (live billing). Unset secrets leave live top-ups off (403 as before). */
export const stripeSettings = z.object({
  /** sk_live_... or sk_test_...; with BILLING_MODE=live, POST /balance creates Checkout Sessions. */
  STRIPE_SECRET_KEY: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(8).optional()),
  /** whsec_... of the webhook endpoint Stripe calls (POST /api/webhooks/stripe). */
  STRIPE_WEBHOOK_SECRET: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(8).optional()),
  /** Where the Stripe client sends API calls; only for tests against a local server (the package's host/port/protocol options). */
  STRIPE_API_URL: z.preprocess((v) => (v === '' ? undefined : v), z.string().url().optional()),
  /** Balance currency; the platform does not convert (balances, prices and top-ups are in it, 1:1). Two-decimal currencies only. */
  BILLING_CURRENCY: z.enum(['usd', 'eur', 'gbp', 'cad', 'aud', 'chf']).default('usd'),
  TOPUP_MIN_DOLLARS: z.coerce.number().min(0.5).max(100_000).default(5),
  TOPUP_MAX_DOLLARS: z.coerce.number().min(1).max(1_000_000).default(1_000),
});
export type StripeSettings = z.output<typeof stripeSettings> & { PUBLIC_URL: string };

/** The official client, pointed at STRIPE_API_URL when set (tests), with retries on network errors. */
export function createStripe(settings: StripeSettings): Stripe | null {
  if (!settings.STRIPE_SECRET_KEY) return null;
  const target = settings.STRIPE_API_URL ? new URL(settings.STRIPE_API_URL) : null;
  return new Stripe(settings.STRIPE_SECRET_KEY, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    ...(target
      ? {
          host: target.hostname,
          port: target.port || (target.protocol === 'https:' ? 443 : 80),
          protocol: target.protocol === 'https:' ? 'https' : 'http',
        }
      : {}),
  });
}

const dollarsToMicros = (dollars: number) => BigInt(Math.round(dollars * 1_000_000));

/**
 * Starts a live top-up: a `topups` row, then a Stripe Checkout Session in payment mode for the
 * amount, which the person pays on Stripe's page. Nothing is credited here: only Stripe's webhook
 * credits, with the amount its event carries. The caller's Idempotency-Key is passed to Stripe, so a
 * retried request gets the same session.
 */
export async function startCheckout(
  sql: Sql,
  stripe: Stripe,
  settings: StripeSettings,
  input: { accountId: string; amountMicros: bigint; idempotencyKey: string | null },
): Promise<{ checkoutUrl: string; topUpId: string }> {
  const min = dollarsToMicros(settings.TOPUP_MIN_DOLLARS);
  const max = dollarsToMicros(settings.TOPUP_MAX_DOLLARS);
  if (input.amountMicros < min || input.amountMicros > max) {
    throw new PlatformError('validation_failed', `amount must be between ${formatDollars(min)} and ${formatDollars(max)}`, {
      hint: `Top-ups go through Stripe in ${settings.BILLING_CURRENCY.toUpperCase()}; amounts with at most two decimals.`,
    });
  }
  if (input.amountMicros % MICROS_PER_MINOR !== 0n) {
    throw new PlatformError('validation_failed', 'amount must have at most two decimal places for a card payment', {
      hint: 'For example {"amount": 20} or {"amount": "12.50"}.',
    });
  }
  // A retried request with the same Idempotency-Key answers the same top-up and Checkout page.
  let topUpId = `top_${randomBytes(10).toString('hex')}`;
  await insertTopup(sql, {
    id: topUpId,
    accountId: input.accountId,
    requestedMicros: input.amountMicros,
    currency: settings.BILLING_CURRENCY,
    idempotencyKey: input.idempotencyKey,
  });
  if (input.idempotencyKey) {
    const existing = await findTopupByIdempotencyKey(sql, input.accountId, input.idempotencyKey);
    if (!existing) throw new Error('top-up with an idempotency key vanished');
    if (existing.requested_micros !== input.amountMicros) {
      throw new PlatformError('idempotency_conflict', 'This Idempotency-Key was used for a top-up of another amount', {
        hint: 'Use a new key for a new top-up.',
      });
    }
    if (existing.checkout_url) return { checkoutUrl: existing.checkout_url, topUpId: existing.id };
    topUpId = existing.id;
  }
  const origin = new URL(settings.PUBLIC_URL).origin;
  let session: Stripe.Checkout.Session;
  try {
    session = await stripe.checkout.sessions.create(
      {
        mode: 'payment',
        client_reference_id: input.accountId,
        metadata: { topUpId, accountId: input.accountId },
        payment_intent_data: { metadata: { topUpId, accountId: input.accountId } },
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: settings.BILLING_CURRENCY,
              unit_amount: Number(input.amountMicros / MICROS_PER_MINOR),
              product_data: { name: 'Balance top-up' },
            },
          },
        ],
        success_url: `${origin}/?topup=succeeded&topUpId=${topUpId}`,
        cancel_url: `${origin}/?topup=cancelled&topUpId=${topUpId}`,
      },
      input.idempotencyKey ? { idempotencyKey: `topup:${input.accountId}:${input.idempotencyKey}` } : {},
    );
  } catch (error) {
    throw new PlatformError('upstream_unavailable', 'The payment provider could not start the payment', {
      hint: 'Nothing was charged. Try again in a minute.',
      headers: { 'Retry-After': '30' },
      cause: error,
    });
  }
  if (!session.url) throw new PlatformError('upstream_error', 'The payment provider answered without a payment page');
  await setTopupCheckoutSession(sql, topUpId, session.id, session.url);
  return { checkoutUrl: session.url, topUpId };
}

/** Checks the Stripe-Signature of a webhook's raw body with the package's constructEvent; 400 when it fails. */
export function verifyStripeEvent(stripe: Stripe, rawBody: Buffer, signature: string | undefined, secret: string): Stripe.Event {
  if (!signature) throw new PlatformError('validation_failed', 'Stripe-Signature header is missing', { hint: 'Only Stripe calls this endpoint.' });
  try {
    return stripe.webhooks.constructEvent(rawBody, signature, secret);
  } catch {
    throw new PlatformError('validation_failed', 'Stripe-Signature does not verify for this body', {
      hint: 'Only Stripe calls this endpoint; check STRIPE_WEBHOOK_SECRET.',
    });
  }
}

const paymentIntentOf = (value: string | { id: string } | null | undefined) => (value == null ? null : typeof value === 'string' ? value : value.id);

/**
 * Applies one verified Stripe event, exactly once (the event id is recorded in the same transaction
 * as what it changes): a paid Checkout Session credits the account the amount the event carries; a
 * refund or a dispute takes back what it credited. Other types are acknowledged and ignored.
 */
export async function applyStripeEvent(sql: Sql, event: Stripe.Event, stripe?: Stripe): Promise<string> {
  // A saved card for auto top-up: which method is read from Stripe before the transaction.
  let setupPaymentMethod: string | null = null;
  if (event.type === 'checkout.session.completed' && event.data.object.mode === 'setup' && stripe) {
    const setupIntent = event.data.object.setup_intent;
    const id = typeof setupIntent === 'string' ? setupIntent : setupIntent?.id;
    if (id) {
      const intent = await stripe.setupIntents.retrieve(id);
      setupPaymentMethod = typeof intent.payment_method === 'string' ? intent.payment_method : (intent.payment_method?.id ?? null);
    }
  }
  return sql.begin(async (tx) => {
    if (!(await recordStripeEvent(tx, event.id, event.type))) return 'duplicate';
    switch (event.type) {
      case 'checkout.session.completed':
      case 'checkout.session.async_payment_succeeded': {
        const session = event.data.object;
        if (session.mode === 'setup') {
          const accountId = session.metadata?.accountId;
          const customer = typeof session.customer === 'string' ? session.customer : session.customer?.id;
          if (!accountId || !customer || !setupPaymentMethod) return 'not a card for auto top-up';
          return (await saveAutoTopupPaymentMethod(tx, accountId, customer, setupPaymentMethod)) ? 'card saved' : 'unknown customer';
        }
        // A delayed payment method completes the session unpaid; its async_payment_succeeded credits.
        if (session.payment_status !== 'paid') return 'awaiting payment';
        const topUpId = session.metadata?.topUpId;
        const accountId = session.metadata?.accountId ?? session.client_reference_id;
        if (!topUpId || !accountId || session.amount_total == null) return 'not a top-up';
        const result = await creditPaidCheckout(tx, {
          sessionId: session.id,
          topUpId,
          accountId,
          amountMicros: BigInt(session.amount_total) * MICROS_PER_MINOR,
          currency: session.currency ?? '',
          paymentIntentId: paymentIntentOf(session.payment_intent),
        });
        return result === null ? 'unknown top-up' : result.credited > 0n ? 'credited' : 'already credited';
      }
      case 'payment_intent.succeeded':
        return applyAutoTopupIntent(tx, event.data.object, 'succeeded');
      case 'payment_intent.payment_failed':
        return applyAutoTopupIntent(tx, event.data.object, 'failed');
      case 'charge.refunded': {
        const charge = event.data.object;
        const paymentIntentId = paymentIntentOf(charge.payment_intent);
        if (!paymentIntentId) return 'no payment intent';
        await applyPaymentAdjustment(tx, { paymentIntentId, refundedMicros: BigInt(charge.amount_refunded) * MICROS_PER_MINOR });
        return 'refund applied';
      }
      case 'charge.dispute.created': {
        const dispute = event.data.object;
        const paymentIntentId = paymentIntentOf(dispute.payment_intent);
        if (!paymentIntentId) return 'no payment intent';
        // An inquiry moves no funds: nothing is taken back unless it becomes a dispute.
        if (dispute.status.startsWith('warning_')) return 'inquiry ignored';
        await applyPaymentAdjustment(tx, { paymentIntentId, disputedMicros: BigInt(dispute.amount) * MICROS_PER_MINOR });
        return 'dispute applied';
      }
      case 'charge.dispute.closed': {
        const dispute = event.data.object;
        const paymentIntentId = paymentIntentOf(dispute.payment_intent);
        if (!paymentIntentId || dispute.status !== 'won') return 'ignored';
        await applyPaymentAdjustment(tx, { paymentIntentId, disputeWon: true });
        return 'dispute won';
      }
      case 'charge.dispute.funds_withdrawn': {
        // The funds leave when a dispute that began as an inquiry becomes one.
        const dispute = event.data.object;
        const paymentIntentId = paymentIntentOf(dispute.payment_intent);
        if (!paymentIntentId) return 'no payment intent';
        await applyPaymentAdjustment(tx, { paymentIntentId, disputedMicros: BigInt(dispute.amount) * MICROS_PER_MINOR });
        return 'dispute applied';
      }
      default:
        return 'ignored';
    }
  }) as Promise<string>;
}

/**
 * Applies a PaymentIntent's final outcome to its auto top-up, for Stripe's webhook and the
 * reconciler alike: paid credits it once (creditPaidCheckout is idempotent per top-up) and ends the
 * attempt; failed marks it failed once and backs off. Says what it did.
 */
export async function applyAutoTopupIntent(tx: Db, intent: Stripe.PaymentIntent, outcome: 'succeeded' | 'failed'): Promise<string> {
  if (intent.metadata?.purpose !== 'auto-topup') return 'ignored';
  const { accountId, topUpId } = intent.metadata;
  if (!accountId || !topUpId) return 'not a top-up';
  if (outcome === 'failed') {
    if (!(await failTopup(tx, topUpId))) return 'already settled';
    await finishAutoTopup(tx, accountId, { ok: false, error: intent.last_payment_error?.message ?? 'payment failed' });
    return 'auto top-up failed';
  }
  const result = await creditPaidCheckout(tx, {
    sessionId: null,
    topUpId,
    accountId,
    amountMicros: BigInt(intent.amount_received) * MICROS_PER_MINOR,
    currency: intent.currency,
    paymentIntentId: intent.id,
  });
  if (result === null) return 'unknown top-up';
  await finishAutoTopup(tx, accountId, { ok: true });
  return result.credited > 0n ? 'credited' : 'already credited';
}
