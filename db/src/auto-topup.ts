import type { Db } from './sql.js';

export interface AutoTopupRow {
  id: string;
  email: string;
  stripe_customer_id: string | null;
  auto_topup_enabled: boolean;
  auto_topup_threshold_micros: bigint | null;
  auto_topup_amount_micros: bigint | null;
  auto_topup_payment_method: string | null;
  auto_topup_in_flight_since: Date | null;
  auto_topup_failures: number;
  auto_topup_retry_after: Date | null;
  auto_topup_last_error: string | null;
}

const COLUMNS = `id, email, stripe_customer_id, auto_topup_enabled, auto_topup_threshold_micros, auto_topup_amount_micros,
  auto_topup_payment_method, auto_topup_in_flight_since, auto_topup_failures, auto_topup_retry_after, auto_topup_last_error`;

export async function getAutoTopup(db: Db, accountId: string): Promise<AutoTopupRow | null> {
  const [row] = await db<AutoTopupRow[]>`select ${db.unsafe(COLUMNS)} from accounts where id = ${accountId}`;
  return row ?? null;
}

export async function setAutoTopup(
  db: Db,
  accountId: string,
  config: { enabled: boolean; thresholdMicros: bigint; amountMicros: bigint },
): Promise<AutoTopupRow> {
  const [row] = await db<AutoTopupRow[]>`
    update accounts set auto_topup_enabled = ${config.enabled}, auto_topup_threshold_micros = ${config.thresholdMicros},
           auto_topup_amount_micros = ${config.amountMicros}, auto_topup_failures = 0, auto_topup_retry_after = null
     where id = ${accountId} returning ${db.unsafe(COLUMNS)}`;
  if (!row) throw new Error(`account ${accountId} does not exist`);
  return row;
}

export async function setStripeCustomer(db: Db, accountId: string, customerId: string): Promise<void> {
  await db`update accounts set stripe_customer_id = ${customerId} where id = ${accountId} and stripe_customer_id is null`;
}

/** Saves the payment method a setup-mode Checkout collected; false when the customer is not this account's. */
export async function saveAutoTopupPaymentMethod(db: Db, accountId: string, customerId: string, paymentMethod: string): Promise<boolean> {
  const rows = await db`
    update accounts set auto_topup_payment_method = ${paymentMethod}, auto_topup_failures = 0, auto_topup_retry_after = null, auto_topup_last_error = null
     where id = ${accountId} and stripe_customer_id = ${customerId} returning id`;
  return rows.length > 0;
}

/**
 * Claims the account's one auto top-up attempt when its balance is below the threshold: enabled, a
 * saved payment method, none in flight (or one whose job died for an hour before paying anything),
 * no payment made and still unconfirmed, and past any backoff. The row
 * (with the amount to charge) when this caller won the claim.
 */
export async function claimAutoTopup(db: Db, accountId: string): Promise<AutoTopupRow | null> {
  const [row] = await db<AutoTopupRow[]>`
    update accounts set auto_topup_in_flight_since = now()
     where id = ${accountId} and auto_topup_enabled and auto_topup_payment_method is not null and stripe_customer_id is not null
       and balance_micros < auto_topup_threshold_micros
       and (auto_topup_in_flight_since is null or auto_topup_in_flight_since < now() - interval '1 hour')
       -- A payment already made and waiting for Stripe's confirmation is never followed by another.
       and not exists (select 1 from topups t where t.account_id = accounts.id and t.kind = 'auto' and t.status = 'pending'
                         and t.stripe_payment_intent_id is not null)
       and (auto_topup_retry_after is null or auto_topup_retry_after < now())
    returning ${db.unsafe(COLUMNS)}`;
  return row ?? null;
}

/** The attempt is over: success clears failures; a failure counts and backs off (1 h, doubling, at most a day). */
export async function finishAutoTopup(db: Db, accountId: string, outcome: { ok: true } | { ok: false; error: string }): Promise<AutoTopupRow | null> {
  const [row] = outcome.ok
    ? await db<AutoTopupRow[]>`
        update accounts set auto_topup_in_flight_since = null, auto_topup_failures = 0, auto_topup_retry_after = null, auto_topup_last_error = null
         where id = ${accountId} returning ${db.unsafe(COLUMNS)}`
    : await db<AutoTopupRow[]>`
        update accounts set auto_topup_in_flight_since = null, auto_topup_failures = auto_topup_failures + 1, auto_topup_last_error = ${outcome.error},
               auto_topup_retry_after = now() + least(interval '1 hour' * power(2, auto_topup_failures), interval '24 hours')
         where id = ${accountId} returning ${db.unsafe(COLUMNS)}`;
  return row ?? null;
}
