import type { ChargeRequest, ChargeResult } from '#db/ledger';
import { getBalanceThresholds, markBalanceDepleted, markBalanceLow } from '#db/balance-alerts';
import type { Db } from '#db/sql';

/** How long an edge trusts the threshold it read for an account (a change applies within this). */
const THRESHOLD_TTL_MS = 30_000;
const CACHE_MAX = 50_000;

export type BalanceAlert =
  | { type: 'balance.low'; balanceMicros: bigint; thresholdMicros: bigint }
  | { type: 'balance.depleted'; balanceMicros: bigint }
  /** The balance is below an armed auto top-up's threshold (at most every AUTO_TOPUP_RECHECK_MS per account and edge). */
  | { type: 'auto-topup'; balanceMicros: bigint };

/** How often one edge asks again for an account whose balance stays below its auto top-up threshold. */
const AUTO_TOPUP_RECHECK_MS = 10_000;

/**
 * Watches charges for the balance crossing the account's low-balance threshold, or running out,
 * off the response path: `observe` returns at once and the check (a cached threshold, then one
 * atomic state change that only the first observer of a crossing wins) runs after. Each crossing
 * is announced once; a credit that lifts the balance re-arms it (settleBalanceAlertState).
 */
export class BalanceAlerts {
  private readonly thresholds = new Map<string, { low: bigint | null; autoTopup: bigint | null; until: number }>();
  private readonly autoTopupAsked = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly announce: (accountId: string, alert: BalanceAlert) => Promise<void>,
    private readonly onError: (error: unknown) => void,
  ) {}

  observe(req: ChargeRequest, result: ChargeResult): void {
    if (result.ok) {
      const after = result.balanceMicros;
      const before = after + req.costMicros;
      // Nearly every charge crosses nothing: with the account's thresholds cached, that is decided here,
      // without the promises of the asynchronous check (one charge after another on the proxy's path).
      const cached = this.thresholds.get(req.accountId);
      if (cached && cached.until > Date.now() && !mayAlert(cached, before, after)) return;
      void this.afterCharge(req.accountId, before, after).catch(this.onError);
    } else if (result.reason === 'insufficient_balance') {
      void this.depleted(req.accountId, result.balanceMicros, req.costMicros).catch(this.onError);
    }
  }

  /** Forgets a cached threshold (the account changed it on this edge). */
  forget(accountId: string): void {
    this.thresholds.delete(accountId);
    this.autoTopupAsked.delete(accountId);
  }

  private async thresholdsOf(accountId: string): Promise<{ low: bigint | null; autoTopup: bigint | null }> {
    const cached = this.thresholds.get(accountId);
    if (cached && cached.until > Date.now()) return cached;
    const value = await getBalanceThresholds(this.db, accountId);
    if (this.thresholds.size >= CACHE_MAX) this.thresholds.clear();
    this.thresholds.set(accountId, { ...value, until: Date.now() + THRESHOLD_TTL_MS });
    return value;
  }

  private async afterCharge(accountId: string, before: bigint, after: bigint): Promise<void> {
    const thresholds = await this.thresholdsOf(accountId);
    if (thresholds.autoTopup !== null && after < thresholds.autoTopup) {
      const asked = this.autoTopupAsked.get(accountId) ?? 0;
      if (Date.now() - asked >= AUTO_TOPUP_RECHECK_MS) {
        if (this.autoTopupAsked.size >= CACHE_MAX) this.autoTopupAsked.clear();
        this.autoTopupAsked.set(accountId, Date.now());
        await this.announce(accountId, { type: 'auto-topup', balanceMicros: after });
      }
    }
    if (after === 0n) return this.depleted(accountId, after, 1n);
    const threshold = thresholds.low;
    if (threshold === null || !(before >= threshold && after < threshold)) return;
    if (await markBalanceLow(this.db, accountId))
      await this.announce(accountId, { type: 'balance.low', balanceMicros: after, thresholdMicros: threshold });
  }

  /** `belowMicros`: the balance is still under it (the refused call's price; 1 when a charge left nothing). */
  private async depleted(accountId: string, balanceMicros: bigint, belowMicros: bigint): Promise<void> {
    if (await markBalanceDepleted(this.db, accountId, belowMicros)) await this.announce(accountId, { type: 'balance.depleted', balanceMicros });
  }
}

/** Whether a charge from `before` to `after` may call for an alert or an automatic top-up (afterCharge decides). */
function mayAlert(thresholds: { low: bigint | null; autoTopup: bigint | null }, before: bigint, after: bigint): boolean {
  if (after === 0n) return true;
  if (thresholds.autoTopup !== null && after < thresholds.autoTopup) return true;
  return thresholds.low !== null && before >= thresholds.low && after < thresholds.low;
}
