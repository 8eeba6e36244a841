import type { Db } from './sql.js';

/** The balances below which something happens: the low-balance alert, and an armed auto top-up. */
export async function getBalanceThresholds(db: Db, accountId: string): Promise<{ low: bigint | null; autoTopup: bigint | null }> {
  const [row] = await db<{ low: bigint | null; auto: bigint | null }[]>`
    select low_balance_threshold_micros as low,
           case when auto_topup_enabled and auto_topup_payment_method is not null then auto_topup_threshold_micros end as auto
      from accounts where id = ${accountId}`;
  return { low: row?.low ?? null, autoTopup: row?.auto ?? null };
}

export async function getLowBalanceThreshold(db: Db, accountId: string): Promise<bigint | null> {
  const [row] = await db<{ low_balance_threshold_micros: bigint | null }[]>`
    select low_balance_threshold_micros from accounts where id = ${accountId}`;
  return row?.low_balance_threshold_micros ?? null;
}

/** Sets (or with null clears) the threshold; the state follows the balance as it stands now. */
export async function setLowBalanceThreshold(db: Db, accountId: string, thresholdMicros: bigint | null): Promise<void> {
  await db`
    update accounts set low_balance_threshold_micros = ${thresholdMicros},
           balance_alert_state = case when balance_micros = 0 then 'depleted'
                                      when ${thresholdMicros}::bigint is not null and balance_micros < ${thresholdMicros}::bigint then 'low'
                                      else 'ok' end
     where id = ${accountId}`;
}

/**
 * Moves an account to 'low' if it was 'ok' and its balance is still under its threshold; true when it moved (announce it
 * once). The check runs after the charge it observed: a top-up settled in between (settleBalanceAlertState) leaves it 'ok'.
 */
export async function markBalanceLow(db: Db, accountId: string): Promise<boolean> {
  const rows = await db`
    update accounts set balance_alert_state = 'low'
     where id = ${accountId} and balance_alert_state = 'ok'
       and low_balance_threshold_micros is not null and balance_micros < low_balance_threshold_micros
    returning id`;
  return rows.length > 0;
}

/**
 * Moves an account to 'depleted' unless it is already, while its balance is still under `belowMicros` (the refused
 * call's price, or 1 for a charge that left nothing); true when it moved (announce it once). Without that condition a
 * refusal checked after a top-up had settled marked the topped-up account depleted again, and its next crossing was
 * never announced.
 */
export async function markBalanceDepleted(db: Db, accountId: string, belowMicros: bigint): Promise<boolean> {
  const rows = await db`
    update accounts set balance_alert_state = 'depleted'
     where id = ${accountId} and balance_alert_state <> 'depleted' and balance_micros < ${belowMicros}
    returning id`;
  return rows.length > 0;
}

/** After a credit: back to 'ok' at or above the threshold, 'low' above zero but below it. */
export async function settleBalanceAlertState(db: Db, accountId: string): Promise<void> {
  await db`
    update accounts set balance_alert_state = case
             when balance_micros >= coalesce(low_balance_threshold_micros, 1) then 'ok'
             when balance_micros > 0 then 'low' else 'depleted' end
     where id = ${accountId} and balance_alert_state <> 'ok'`;
}
