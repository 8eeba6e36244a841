import { clawback, credit } from './ledger.js';
import type { Db } from './sql.js';

export interface TopupRow {
  id: string;
  account_id: string;
  requested_micros: bigint;
  currency: string;
  stripe_checkout_session_id: string | null;
  stripe_payment_intent_id: string | null;
  status: 'pending' | 'completed' | 'expired';
  credited_micros: bigint;
  refunded_micros: bigint;
  disputed_micros: bigint;
  clawed_back_micros: bigint;
}

const TOPUP_COLUMNS = `id, account_id, requested_micros, currency, stripe_checkout_session_id, stripe_payment_intent_id, status,
  credited_micros, refunded_micros, disputed_micros, clawed_back_micros`;

/** Serializes everything that touches one payment (its credit, refunds, disputes) for this transaction. */
async function lockPayment(db: Db, paymentIntentId: string): Promise<void> {
  await db`select pg_advisory_xact_lock(hashtext(${`stripe-payment:${paymentIntentId}`}))`;
}

export async function insertTopup(
  db: Db,
  row: { id: string; accountId: string; requestedMicros: bigint; currency: string; kind?: 'checkout' | 'auto'; idempotencyKey?: string | null },
): Promise<void> {
  await db`insert into topups (id, account_id, requested_micros, currency, kind, idempotency_key)
           values (${row.id}, ${row.accountId}, ${row.requestedMicros}, ${row.currency}, ${row.kind ?? 'checkout'}, ${row.idempotencyKey ?? null})
           on conflict do nothing`;
}

/** The top-up an account asked for with this Idempotency-Key, if any. */
export async function findTopupByIdempotencyKey(
  db: Db,
  accountId: string,
  key: string,
): Promise<(TopupRow & { checkout_url: string | null }) | null> {
  const [row] = await db<(TopupRow & { checkout_url: string | null })[]>`
    select ${db.unsafe(TOPUP_COLUMNS)}, checkout_url from topups where account_id = ${accountId} and idempotency_key = ${key}`;
  return row ?? null;
}

export async function setTopupPaymentIntent(db: Db, id: string, paymentIntentId: string): Promise<void> {
  await db`update topups set stripe_payment_intent_id = ${paymentIntentId} where id = ${id}`;
}

/** A top-up whose payment failed; false when it was already completed or failed. */
export async function failTopup(db: Db, id: string): Promise<boolean> {
  const rows = await db`update topups set status = 'failed' where id = ${id} and status = 'pending' returning id`;
  return rows.length > 0;
}

export async function setTopupCheckoutSession(db: Db, id: string, sessionId: string, checkoutUrl: string): Promise<void> {
  await db`update topups set stripe_checkout_session_id = ${sessionId}, checkout_url = ${checkoutUrl} where id = ${id}`;
}

export async function findTopup(db: Db, accountId: string, id: string): Promise<TopupRow | null> {
  const [row] = await db<TopupRow[]>`select ${db.unsafe(TOPUP_COLUMNS)} from topups where id = ${id} and account_id = ${accountId}`;
  return row ?? null;
}

/** Records a provider event by id; false when it was handled before (a redelivery). */
export async function recordStripeEvent(db: Db, id: string, type: string): Promise<boolean> {
  const rows = await db`insert into stripe_events (id, type) values (${id}, ${type}) on conflict (id) do nothing returning id`;
  return rows.length > 0;
}

/**
 * Takes back what refunds and disputes of a top-up's payment call for and was not taken back yet:
 * at most what was credited. The top-up row must be locked by the caller's transaction.
 */
async function settleAdjustments(db: Db, topup: TopupRow): Promise<bigint> {
  const owed = topup.refunded_micros + topup.disputed_micros;
  const target = owed < topup.credited_micros ? owed : topup.credited_micros;
  const delta = target - topup.clawed_back_micros;
  if (delta < 0n) {
    // Less is owed than was taken back (a dispute was won): the difference is returned.
    await credit(db, {
      accountId: topup.account_id,
      amountMicros: -delta,
      kind: 'adjustment',
      description: `dispute of top-up ${topup.id} won: returned`,
      idempotencyKey: await adjustmentKey(db, topup, 'clawback-returned'),
    });
    await db`update topups set clawed_back_micros = ${target} where id = ${topup.id}`;
    return delta;
  }
  if (delta === 0n) return 0n;
  await clawback(db, {
    accountId: topup.account_id,
    amountMicros: delta,
    description: `refund or dispute of top-up ${topup.id}`,
    idempotencyKey: await adjustmentKey(db, topup, 'clawback'),
  });
  await db`update topups set clawed_back_micros = ${target} where id = ${topup.id}`;
  return delta;
}

/**
 * The key of a top-up's next take-back or return: its number among them. Not the amount it brings
 * the top-up to: amounts repeat (a dispute won, then a refund of the same payment), and a repeated
 * key would skip the second take-back. The top-up row is locked, so the count cannot race; a
 * handled adjustment is not applied twice because clawed_back_micros moves in the same transaction.
 */
async function adjustmentKey(db: Db, topup: TopupRow, kind: 'clawback' | 'clawback-returned'): Promise<string> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from ledger_entries
     where account_id = ${topup.account_id}
       and (idempotency_key like ${`stripe:clawback:${topup.id}:%`} or idempotency_key like ${`stripe:clawback-returned:${topup.id}:%`})`;
  return `stripe:${kind}:${topup.id}:#${(row?.n ?? 0) + 1}`;
}

/**
 * A paid Checkout Session: credits the amount the event carries, once per session (the top-up row is
 * locked, and the ledger entry has the session as its idempotency key), then applies refunds or
 * disputes that arrived before it. Null when the session is not one of ours (or names another account).
 */
export async function creditPaidCheckout(
  db: Db,
  paid: { sessionId: string | null; topUpId: string; accountId: string; amountMicros: bigint; currency: string; paymentIntentId: string | null },
): Promise<{ credited: bigint; clawedBack: bigint } | null> {
  // The same lock as applyPaymentAdjustment: a refund arriving at the same moment waits, then finds
  // the payment linked to this top-up (or this credit finds its adjustment).
  if (paid.paymentIntentId) await lockPayment(db, paid.paymentIntentId);
  const [topup] = await db<TopupRow[]>`
    select ${db.unsafe(TOPUP_COLUMNS)} from topups
     where id = ${paid.topUpId} and account_id = ${paid.accountId} and status <> 'failed'
       and (${paid.sessionId}::text is null or stripe_checkout_session_id is null or stripe_checkout_session_id = ${paid.sessionId}::text)
     for update`;
  if (!topup) return null;
  if (topup.credited_micros > 0n) return { credited: 0n, clawedBack: 0n };
  if (topup.currency !== paid.currency) throw new Error(`top-up ${topup.id} was asked in ${topup.currency}, paid in ${paid.currency}`);
  await credit(db, {
    accountId: paid.accountId,
    amountMicros: paid.amountMicros,
    kind: 'topup',
    description: paid.sessionId ? `Stripe Checkout ${paid.sessionId}` : `Stripe auto top-up ${paid.paymentIntentId ?? topup.id}`,
    idempotencyKey: paid.sessionId ? `stripe:checkout:${paid.sessionId}` : `stripe:topup:${topup.id}`,
  });
  const [adjustment] = paid.paymentIntentId
    ? await db<{ refunded_micros: bigint; disputed_micros: bigint }[]>`
        select refunded_micros, disputed_micros from stripe_payment_adjustments where payment_intent_id = ${paid.paymentIntentId}`
    : [];
  const [updated] = await db<TopupRow[]>`
    update topups set credited_micros = ${paid.amountMicros}, status = 'completed', completed_at = now(),
           stripe_checkout_session_id = coalesce(${paid.sessionId}::text, stripe_checkout_session_id),
           stripe_payment_intent_id = coalesce(${paid.paymentIntentId}::text, stripe_payment_intent_id),
           refunded_micros = greatest(refunded_micros, ${adjustment?.refunded_micros ?? 0n}),
           disputed_micros = greatest(disputed_micros, ${adjustment?.disputed_micros ?? 0n})
     where id = ${topup.id}
    returning ${db.unsafe(TOPUP_COLUMNS)}`;
  const clawedBack = await settleAdjustments(db, updated!);
  return { credited: paid.amountMicros, clawedBack };
}

/**
 * A refund (cumulative amount) or a dispute of a payment: remembered by payment intent (it may come
 * before the payment's checkout event), and taken back from the top-up it paid for, if credited.
 */
export async function applyPaymentAdjustment(
  db: Db,
  adjustment: { paymentIntentId: string; refundedMicros?: bigint; disputedMicros?: bigint; disputeWon?: boolean },
): Promise<{ topUpId: string | null; clawedBack: bigint }> {
  await lockPayment(db, adjustment.paymentIntentId);
  const refunded = adjustment.refundedMicros ?? 0n;
  const disputed = adjustment.disputedMicros ?? 0n;
  await db`
    insert into stripe_payment_adjustments (payment_intent_id, refunded_micros, disputed_micros)
    values (${adjustment.paymentIntentId}, ${refunded}, ${disputed})
    on conflict (payment_intent_id) do update set
      refunded_micros = greatest(stripe_payment_adjustments.refunded_micros, excluded.refunded_micros),
      disputed_micros = case when ${adjustment.disputeWon ?? false} then 0
                             else greatest(stripe_payment_adjustments.disputed_micros, excluded.disputed_micros) end,
      updated_at = now()`;
  const [topup] = await db<TopupRow[]>`
    update topups set refunded_micros = greatest(refunded_micros, ${refunded}),
           disputed_micros = case when ${adjustment.disputeWon ?? false} then 0 else greatest(disputed_micros, ${disputed}) end
     where stripe_payment_intent_id = ${adjustment.paymentIntentId}
    returning ${db.unsafe(TOPUP_COLUMNS)}`;
  if (!topup) return { topUpId: null, clawedBack: 0n };
  return { topUpId: topup.id, clawedBack: await settleAdjustments(db, topup) };
}
