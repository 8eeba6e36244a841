import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import Stripe from 'stripe';
import { z } from 'zod';
import { addJob, PlatformError, type JobDeclaration, createQueue } from '#core/platform';
import { claimAutoTopup, finishAutoTopup, getAutoTopup, setStripeCustomer } from '#db/auto-topup';
import type { Sql } from '#db/sql';
import { failTopup, setTopupPaymentIntent } from '#db/topups';
import { applyAutoTopupIntent, MICROS_PER_MINOR, type StripeSettings } from './stripe-topups.js';

/**
 * `claimedAt`: when the attempt was claimed (ms since the epoch). A job whose claim is not the
 * account's current one is skipped: it was queued late (the add gave up while Redis was away and
 * landed when Redis came back) for an attempt already ended. Jobs queued before it existed lack it.
 */
const autoTopupPayload = z.object({ accountId: z.string().uuid(), claimedAt: z.number().int().optional() });

/**
 * One auto top-up attempt: an off-session PaymentIntent for the account's saved payment method.
 * Network failures are retried (the Stripe idempotency key is the top-up, so a retry never charges
 * twice); a decline is an answer, not a failure of the job.
 */
export const autoTopupJob: JobDeclaration<typeof autoTopupPayload> = {
  queue: 'billing',
  name: 'auto-topup',
  payload: autoTopupPayload,
  options: { attempts: 3, backoff: { type: 'exponential', delay: 30_000 }, removeOnComplete: { age: 86_400 }, removeOnFail: { age: 7 * 86_400 } },
};

/**
 * Claims the account's one attempt (see claimAutoTopup) and queues it; false when none is due. If it
 * cannot be queued (Redis away: addJob gives up after 5 s) the attempt ends as failed and backs off;
 * its job, should it land later, finds its claim gone and charges nothing.
 */
export async function requestAutoTopup(sql: Sql, connection: Redis, prefix: string, accountId: string, timeoutMs?: number): Promise<boolean> {
  const claimed = await claimAutoTopup(sql, accountId);
  if (!claimed) return false;
  const claimedAt = claimed.auto_topup_in_flight_since!.getTime();
  const queue = createQueue(autoTopupJob.queue, { connection, prefix });
  try {
    await addJob(queue, autoTopupJob, { accountId, claimedAt }, { jobId: `auto-topup-${accountId}-${claimedAt}` }, timeoutMs);
  } catch (error) {
    await finishAutoTopup(sql, accountId, { ok: false, error: 'could not be queued' });
    throw error;
  } finally {
    await queue.close();
  }
  return true;
}

/** The Stripe customer of an account, made on first use. */
async function customerOf(sql: Sql, stripe: Stripe, accountId: string, email: string, existing: string | null): Promise<string> {
  if (existing) return existing;
  const customer = await stripe.customers.create({ email, metadata: { accountId } }, { idempotencyKey: `customer:${accountId}` });
  await setStripeCustomer(sql, accountId, customer.id);
  const row = await getAutoTopup(sql, accountId);
  return row?.stripe_customer_id ?? customer.id;
}

/**
 * Starts saving a payment method for auto top-up: a Checkout Session in setup mode for the account's
 * Stripe customer. Stripe's checkout.session.completed (mode setup) saves the method (applyStripeEvent).
 */
export async function startAutoTopupSetup(sql: Sql, stripe: Stripe, settings: StripeSettings, accountId: string): Promise<{ checkoutUrl: string }> {
  const row = await getAutoTopup(sql, accountId);
  if (!row) throw new PlatformError('not_found', 'Account not found');
  const origin = new URL(settings.PUBLIC_URL).origin;
  try {
    const customer = await customerOf(sql, stripe, accountId, row.email, row.stripe_customer_id);
    const session = await stripe.checkout.sessions.create({
      mode: 'setup',
      customer,
      currency: settings.BILLING_CURRENCY,
      metadata: { accountId, purpose: 'auto-topup-setup' },
      setup_intent_data: { metadata: { accountId, purpose: 'auto-topup-setup' } },
      success_url: `${origin}/?autotopup=saved`,
      cancel_url: `${origin}/?autotopup=cancelled`,
    });
    if (!session.url) throw new Error('no setup page');
    return { checkoutUrl: session.url };
  } catch (error) {
    throw new PlatformError('upstream_unavailable', 'The payment provider could not start saving a card', {
      hint: 'Try again in a minute.',
      headers: { 'Retry-After': '30' },
      cause: error,
    });
  }
}

export type AutoTopupOutcome =
  | { status: 'charged'; topUpId: string; paymentIntentId: string }
  | { status: 'failed'; topUpId: string | null; reason: string }
  | { status: 'skipped' };

/**
 * The job: charges the saved payment method off-session for the configured amount. The balance is
 * credited by Stripe's payment_intent.succeeded webhook, like every top-up; until then the attempt
 * stays in flight. A decline (or a card that needs its holder) ends the attempt as failed, backs
 * off, and is reported to the caller so the account can be told.
 */
export async function chargeAutoTopup(
  sql: Sql,
  stripe: Stripe,
  settings: StripeSettings,
  accountId: string,
  attemptKey: string,
  claimedAt?: number,
): Promise<AutoTopupOutcome> {
  const row = await getAutoTopup(sql, accountId);
  if (!row || !row.auto_topup_in_flight_since) return { status: 'skipped' };
  if (claimedAt !== undefined && row.auto_topup_in_flight_since.getTime() !== claimedAt) return { status: 'skipped' };
  if (!row.auto_topup_enabled || !row.auto_topup_payment_method || !row.stripe_customer_id || !row.auto_topup_amount_micros) {
    await finishAutoTopup(sql, accountId, { ok: false, error: 'auto top-up is no longer set up' });
    return { status: 'skipped' };
  }
  const topUpId = `top_${attemptKey.replace(/[^a-zA-Z0-9]/g, '').slice(-20) || randomBytes(10).toString('hex')}`;
  await sql`insert into topups (id, account_id, requested_micros, currency, kind) values (${topUpId}, ${accountId}, ${row.auto_topup_amount_micros}, ${settings.BILLING_CURRENCY}, 'auto')
            on conflict (id) do nothing`;
  let intent: Stripe.PaymentIntent;
  try {
    intent = await stripe.paymentIntents.create(
      {
        amount: Number(row.auto_topup_amount_micros / MICROS_PER_MINOR),
        currency: settings.BILLING_CURRENCY,
        customer: row.stripe_customer_id,
        payment_method: row.auto_topup_payment_method,
        off_session: true,
        confirm: true,
        metadata: { accountId, topUpId, purpose: 'auto-topup' },
      },
      { idempotencyKey: `auto-topup:${topUpId}` },
    );
  } catch (error) {
    if (error instanceof Stripe.errors.StripeCardError || error instanceof Stripe.errors.StripeInvalidRequestError) {
      const reason = `${error.code ?? error.type}: ${error.message}`;
      // Stripe's payment_failed webhook may have got there first: then it is already counted and told.
      if (!(await failTopup(sql, topUpId))) return { status: 'skipped' };
      await finishAutoTopup(sql, accountId, { ok: false, error: reason });
      return { status: 'failed', topUpId, reason };
    }
    throw error;
  }
  await setTopupPaymentIntent(sql, topUpId, intent.id);
  if (intent.status === 'succeeded') {
    // Paid now: credit it here (the webhook that follows finds it credited), so a lost webhook cannot
    // leave the account below its threshold with the card charged.
    await sql.begin((tx) => applyAutoTopupIntent(tx, intent, 'succeeded'));
    return { status: 'charged', topUpId, paymentIntentId: intent.id };
  }
  // A delayed method: Stripe's payment_intent.succeeded (or payment_failed) settles it; until then no
  // other attempt is made (claimAutoTopup).
  if (intent.status === 'processing') return { status: 'charged', topUpId, paymentIntentId: intent.id };
  const reason =
    intent.status === 'requires_action' ? 'the card needs its holder to confirm the payment (authentication_required)' : `payment ${intent.status}`;
  if (!(await failTopup(sql, topUpId))) return { status: 'skipped' };
  await finishAutoTopup(sql, accountId, { ok: false, error: reason });
  return { status: 'failed', topUpId, reason };
}

const reconcilePayload = z.object({ olderThanSeconds: z.number().int().min(0).default(1_800) }).strict();

/**
 * The auto top-up reconciler, a repeatable job: a payment that Stripe took but whose webhook never
 * arrived would otherwise leave its top-up pending for ever, the card charged, the balance not
 * credited, and no later attempt made (claimAutoTopup waits for it).
 */
export const reconcileAutoTopupsJob: JobDeclaration<typeof reconcilePayload> = {
  queue: 'billing',
  name: 'reconcile-auto-topups',
  payload: reconcilePayload,
  options: { attempts: 3, backoff: { type: 'exponential', delay: 60_000 }, removeOnComplete: 50, removeOnFail: 50 },
};

/** At most this many pending payments are asked about per run (the oldest first). */
const RECONCILE_BATCH = 100;

/**
 * Asks Stripe about every auto top-up whose payment has been pending for longer than
 * `olderThanSeconds` and applies what it finds, as the webhook would have: succeeded is credited,
 * canceled or requires_payment_method (declined after all) fails the attempt; a payment still
 * processing is left for the next run.
 */
export async function reconcileAutoTopups(
  sql: Sql,
  stripe: Stripe,
  olderThanSeconds: number,
): Promise<{ checked: number; credited: number; failed: number; errors: { topUpId: string; message: string }[] }> {
  const pending = await sql<{ id: string; stripe_payment_intent_id: string }[]>`
    select id, stripe_payment_intent_id from topups
     where kind = 'auto' and status = 'pending' and stripe_payment_intent_id is not null
       and created_at < now() - make_interval(secs => ${olderThanSeconds})
     order by created_at limit ${RECONCILE_BATCH}`;
  const report = { checked: pending.length, credited: 0, failed: 0, errors: [] as { topUpId: string; message: string }[] };
  for (const row of pending) {
    // One payment Stripe cannot answer for is reported and skipped; it does not hold up the rest.
    try {
      const intent = await stripe.paymentIntents.retrieve(row.stripe_payment_intent_id);
      const outcome =
        intent.status === 'succeeded' ? 'succeeded' : intent.status === 'canceled' || intent.status === 'requires_payment_method' ? 'failed' : null;
      if (outcome === null) continue;
      const done = await sql.begin((tx) => applyAutoTopupIntent(tx, intent, outcome));
      if (done === 'credited') report.credited += 1;
      if (done === 'auto top-up failed') report.failed += 1;
    } catch (error) {
      report.errors.push({ topUpId: row.id, message: error instanceof Error ? error.message : String(error) });
    }
  }
  return report;
}
