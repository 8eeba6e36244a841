import { UnrecoverableError } from 'bullmq';
import { autoTopupJob, chargeAutoTopup, createStripe, reconcileAutoTopups, reconcileAutoTopupsJob } from '#core/billing';
import { enqueueEmail, WebhookEmitter } from '#core/notifications';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/**
 * Auto top-up attempts (queued by the edge when a charge leaves the balance below an armed
 * threshold): an off-session PaymentIntent; Stripe's webhook credits it. A decline ends the attempt:
 * the account hears of it (topup.failed webhook event and an e-mail) and the next attempt backs off.
 */
export function autoTopupProcessor({ sql, redis, settings, log }: QueueDeps): QueueProcessor {
  const stripe = createStripe(settings);
  let webhooks: WebhookEmitter | null = null;
  return processorFor(autoTopupJob, async ({ accountId, claimedAt }, job) => {
    if (!stripe) throw new UnrecoverableError('STRIPE_SECRET_KEY is not set on the workers: auto top-up cannot charge');
    const outcome = await chargeAutoTopup(sql, stripe, settings, accountId, String(job.id), claimedAt);
    if (outcome.status === 'failed') {
      log.warn({ accountId, topUpId: outcome.topUpId }, 'auto top-up declined');
      webhooks ??= new WebhookEmitter(sql, redis, settings.REDIS_PREFIX, settings);
      await webhooks.emit(
        accountId,
        'topup.failed',
        { topUpId: outcome.topUpId, reason: outcome.reason, mode: 'auto' },
        `msg_topup_failed_${outcome.topUpId ?? job.id}`,
      );
      await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'topup-failed', accountId, reason: outcome.reason.slice(0, 500) });
    } else if (outcome.status === 'charged') {
      log.info({ accountId, topUpId: outcome.topUpId }, 'auto top-up charged; the webhook credits it');
    }
    return outcome;
  });
}

/**
 * The auto top-up reconciler (repeatable, every 10 minutes): settles auto top-ups whose payment has
 * been pending for half an hour by asking Stripe, for a webhook that never came (see
 * reconcileAutoTopups). Without Stripe settings it has nothing to do.
 */
export function reconcileAutoTopupsProcessor({ sql, settings, log }: QueueDeps): QueueProcessor {
  const stripe = createStripe(settings);
  return processorFor(reconcileAutoTopupsJob, async ({ olderThanSeconds }) => {
    if (!stripe) return { checked: 0, credited: 0, failed: 0, errors: [] };
    const report = await reconcileAutoTopups(sql, stripe, olderThanSeconds);
    if (report.credited + report.failed > 0) log.warn(report, 'auto top-ups settled by the reconciler: their Stripe webhook never arrived');
    if (report.errors.length > 0)
      log.error({ errors: report.errors }, 'auto top-up reconciler: Stripe could not say what became of these payments; the next run asks again');
    return report;
  });
}
