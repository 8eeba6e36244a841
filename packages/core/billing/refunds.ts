import type { Queue } from 'bullmq';
import { z } from 'zod';
import { chargesOwedARefund, refund } from '#db/ledger';
import type { Db } from '#db/sql';
import { addJob, type JobDeclaration } from '#core/platform';

/**
 * No refund is ever lost. A refund owed on a failed proxied call is written at once; when Postgres
 * refuses it at that moment, a job keyed by the charge id carries it (retried for about 18 hours,
 * `refund()` is idempotent), and the caller still gets its 502/503. Whatever slips past both (Redis
 * down too, an edge that died mid-call) the reconciler finds: see chargesOwedARefund.
 */
const refundPayload = z.object({ chargeId: z.string().uuid(), reason: z.string().min(1).max(200) });
const reconcilePayload = z.object({}).strict();

export const refundChargeJob: JobDeclaration<typeof refundPayload> = {
  queue: 'refunds',
  name: 'refund-charge',
  payload: refundPayload,
  // 17 attempts, each wait twice the last from 1 s: the last about 18 hours after the first. Beyond that
  // the waits would grow past a day each; the reconciler settles whatever is still owed.
  options: { attempts: 17, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete: 1_000, removeOnFail: 10_000 },
};
/** The reconciler: a repeatable job on the same queue. */
export const reconcileRefundsJob: JobDeclaration<typeof reconcilePayload> = {
  queue: 'refunds',
  name: 'reconcile-refunds',
  payload: reconcilePayload,
  options: { attempts: 3, backoff: { type: 'fixed', delay: 10_000 }, removeOnComplete: 100, removeOnFail: 100 },
};

export type RefundOutcome =
  | {
      refunded: true;
      refundId: string;
      /** The balance after the refund (see CreditReservations.refund for the caller's view of it). */
      balanceMicros: bigint;
      accountId: string;
      amountMicros: bigint;
      /** False when the charge had been refunded already (this call changed nothing). */
      created: boolean;
    }
  | { refunded: false; queued: boolean };

/**
 * Refunds a charge now, or hands the refund to the queue when Postgres refuses it. Never throws: the
 * caller's answer (a 502 or 503) must not turn into a 500 because the refund could not be written.
 */
export async function refundOrQueue(
  db: Db,
  queue: Queue,
  chargeId: string,
  reason: string,
  log: { error(object: Record<string, unknown>, message: string): void },
): Promise<RefundOutcome> {
  try {
    const done = await refund(db, chargeId, reason);
    return { refunded: true, ...done };
  } catch (error) {
    try {
      // Bounded: a queue waits for Redis as long as Redis is away, and the caller's answer waits for this.
      await addJob(queue, refundChargeJob, { chargeId, reason }, { jobId: `refund-${chargeId}` }, 3_000);
      log.error({ err: error, chargeId }, 'refund could not be written now; queued (job refund-<chargeId>)');
      return { refunded: false, queued: true };
    } catch (queueError) {
      log.error({ err: error, queueErr: queueError, chargeId }, 'refund could not be written or queued; the reconciler will settle it');
      return { refunded: false, queued: false };
    }
  }
}

/** Settles what the reconciler finds (see chargesOwedARefund); returns how many it refunded. */
export async function reconcileRefunds(db: Db, olderThanSeconds: number): Promise<number> {
  let settled = 0;
  for (const charge of await chargesOwedARefund(db, olderThanSeconds)) {
    await refund(db, charge.id, charge.reason === 'no_outcome' ? 'refund: reconciled (no recorded outcome)' : 'refund: reconciled (refund owed)');
    settled += 1;
  }
  return settled;
}
