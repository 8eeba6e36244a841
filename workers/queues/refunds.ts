import { reconcileRefunds, reconcileRefundsJob, refundChargeJob } from '#core/billing';
import { refund } from '#db/ledger';
import { settleExpiredHolds } from '#db/credit-holds';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/**
 * Refunds that could not be written when they were owed (Postgres refused them at that moment),
 * retried until they land; `refund()` is idempotent, so a retry never refunds twice.
 */
export function refundProcessor({ sql }: Pick<QueueDeps, 'sql'>): QueueProcessor {
  return processorFor(
    refundChargeJob,
    async ({ chargeId, reason }) => {
      const done = await refund(sql, chargeId, reason);
      return { chargeId, refundId: done.refundId };
    },
    // One short transaction: past 45 s it waits on something that will not answer (see processorFor).
    { deadlineMs: 45_000 },
  );
}

/**
 * The reconciler (a repeatable job): settles charges whose outcome was never recorded, and the
 * credit holds of edges that stopped settling them (charging the calls their usage events name,
 * returning the rest).
 */
export function reconcileProcessor({ sql, settings, log }: QueueDeps): QueueProcessor {
  return processorFor(reconcileRefundsJob, async () => {
    const holds = await settleExpiredHolds(sql, settings.CREDIT_HOLD_GRACE_SECONDS, {
      onFailure: (holdId, err) =>
        log.error({ holdId, err }, 'an expired credit hold could not be settled; it stays open and is tried again at the next run'),
    });
    if (holds.holds > 0)
      log.warn({ holds: holds.holds, charges: holds.charges }, 'reconciler settled expired credit holds (their edge stopped settling them)');
    const settled = await reconcileRefunds(sql, settings.REFUND_RECONCILE_AFTER_SECONDS);
    if (settled > 0) log.warn({ settled }, 'refund reconciler settled charges whose refund had not been written');
    return { settled, holds: holds.holds, heldCharges: holds.charges, holdsFailed: holds.failed.length };
  });
}
