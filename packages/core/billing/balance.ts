import { parseDollars } from '#contracts/money';
import { PlatformError } from '#core/platform';
import { getAutoTopup, setAutoTopup, type AutoTopupRow } from '#db/auto-topup';
import { getLowBalanceThreshold, setLowBalanceThreshold } from '#db/balance-alerts';
import { getBalance } from '#db/ledger';
import type { Db } from '#db/sql';
import type { StripeSettings } from './stripe-topups.js';

export type { AutoTopupRow };
export { settleBalanceAlertState } from '#db/balance-alerts';
export { getLowBalanceThreshold as lowBalanceThreshold };

/** The account's prepaid balance in micro-dollars (0 for an account that no longer exists). */
export async function accountBalance(db: Db, accountId: string): Promise<bigint> {
  return (await getBalance(db, accountId)) ?? 0n;
}

/** Sets the low-balance threshold from dollars (null: none); answers it in micro-dollars. */
export async function changeLowBalanceThreshold(db: Db, accountId: string, dollars: number | string | null): Promise<bigint | null> {
  const micros = dollars === null ? null : parseDollars(dollars);
  if (micros === 0n || (dollars !== null && micros === null)) {
    throw new PlatformError('validation_failed', 'lowBalanceThreshold must be a positive dollar amount with at most six decimal places, or null', {
      hint: 'For example {"lowBalanceThreshold": 2}.',
    });
  }
  await setLowBalanceThreshold(db, accountId, micros);
  return micros;
}

/** The account's auto top-up settings and state. */
export async function autoTopupSettings(db: Db, accountId: string): Promise<AutoTopupRow> {
  const row = await getAutoTopup(db, accountId);
  if (!row) throw new PlatformError('invalid_session', 'Account no longer exists');
  return row;
}

/**
 * Sets auto top-up from dollars: a positive threshold, and an amount in whole cents within the
 * top-up bounds (what Stripe will be asked to charge off-session).
 */
export async function configureAutoTopup(
  db: Db,
  settings: Pick<StripeSettings, 'TOPUP_MIN_DOLLARS' | 'TOPUP_MAX_DOLLARS'>,
  accountId: string,
  input: { enabled: boolean; threshold: number | string; amount: number | string },
): Promise<AutoTopupRow> {
  const threshold = parseDollars(input.threshold);
  const amount = parseDollars(input.amount);
  const { TOPUP_MIN_DOLLARS, TOPUP_MAX_DOLLARS } = settings;
  if (threshold === null || threshold <= 0n)
    throw new PlatformError('validation_failed', 'threshold must be a positive dollar amount', { hint: 'For example {"threshold": 5}.' });
  if (amount === null || amount % 10_000n !== 0n || Number(amount) / 1e6 < TOPUP_MIN_DOLLARS || Number(amount) / 1e6 > TOPUP_MAX_DOLLARS) {
    throw new PlatformError(
      'validation_failed',
      `amount must be between ${TOPUP_MIN_DOLLARS} and ${TOPUP_MAX_DOLLARS} dollars, with at most two decimals`,
      { hint: 'For example {"amount": 20}.' },
    );
  }
  return setAutoTopup(db, accountId, { enabled: input.enabled, thresholdMicros: threshold, amountMicros: amount });
}
