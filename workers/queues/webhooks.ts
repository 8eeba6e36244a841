import { UnrecoverableError } from 'bullmq';
import { Agent, request } from 'undici';
import { assertPublicHost, guardedLookup, PrivateUpstreamError } from '#core/gateway';
import { PlatformError, createQueue, readBounded } from '#core/platform';
import { enqueueEmail, enqueueDeliveries, signWebhook, webhookDeliveryJob } from '#core/notifications';
import { disableFailingEndpoint, listStalePendingDeliveries, loadDelivery, recordDeliveryAttempt } from '#db/webhooks';
import { z } from 'zod';
import type { JobDeclaration } from '#core/platform';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/** How much of a receiver's answer is kept in the delivery log (it is the receiver's text, shown to the account). */
const ERROR_TEXT_MAX = 300;

/**
 * Delivers one webhook: signs the event (Standard Webhooks) and POSTs it to the endpoint, through a
 * connection that refuses private addresses (the proxy's SSRF guard) unless ALLOW_PRIVATE_UPSTREAMS.
 * A 2xx is a success; anything else is retried with exponential backoff, and after the last attempt
 * the delivery is failed and, if nothing reached the endpoint since, the endpoint is disabled and the
 * account told by e-mail. At least once: a worker that dies after the POST sends it again with the
 * same webhook-id, by which receivers deduplicate.
 */
export function webhookDeliveryProcessor({ sql, redis, settings, log }: QueueDeps): QueueProcessor {
  const agent = new Agent({
    keepAliveTimeout: 5_000,
    headersTimeout: settings.WEBHOOK_TIMEOUT_MS,
    bodyTimeout: settings.WEBHOOK_TIMEOUT_MS,
    connect: settings.ALLOW_PRIVATE_UPSTREAMS
      ? { timeout: settings.WEBHOOK_TIMEOUT_MS }
      : { timeout: settings.WEBHOOK_TIMEOUT_MS, lookup: guardedLookup as never },
  });

  return processorFor(
    webhookDeliveryJob,
    async ({ deliveryId }, job) => {
      const delivery = await loadDelivery(sql, deliveryId);
      if (!delivery || delivery.status === 'succeeded') return { skipped: true };
      if (delivery.endpoint_status !== 'enabled') {
        await recordDeliveryAttempt(sql, deliveryId, { ok: false, statusCode: null, error: 'endpoint disabled', final: true });
        return { skipped: true };
      }
      const body = JSON.stringify(delivery.payload);
      const headers = signWebhook(settings.CONNECTIONS_MASTER_KEY, delivery.endpoint_id, delivery, { id: delivery.event_id, body, at: new Date() });
      let statusCode: number | null = null;
      let error: string | null = null;
      try {
        // An address written as an IP never reaches the connection's DNS lookup: check it (and the
        // host's current addresses) first; guardedLookup still refuses a name that rebinds later.
        if (!settings.ALLOW_PRIVATE_UPSTREAMS) await assertPublicHost(new URL(delivery.url).hostname);
        const response = await request(delivery.url, {
          method: 'POST',
          dispatcher: agent,
          headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'Service-Webhooks/1' },
          body,
          signal: AbortSignal.timeout(settings.WEBHOOK_TIMEOUT_MS),
        });
        statusCode = response.statusCode;
        // The endpoint's answer is read only as far as the delivery log keeps it.
        const text = (await readBounded(response.body, ERROR_TEXT_MAX * 4)).bytes.toString('utf8');
        if (statusCode < 200 || statusCode >= 300) error = `HTTP ${statusCode}${text ? `: ${text.slice(0, ERROR_TEXT_MAX)}` : ''}`;
      } catch (caught) {
        const privateTarget =
          (caught instanceof PlatformError && caught.code === 'private_upstream') ||
          caught instanceof PrivateUpstreamError ||
          (caught as { cause?: unknown }).cause instanceof PrivateUpstreamError;
        error = privateTarget
          ? 'the endpoint resolves to a private address'
          : `${(caught as Error).name}: ${(caught as Error).message}`.slice(0, ERROR_TEXT_MAX);
      }
      const ok = error === null;
      const final = !ok && job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      await recordDeliveryAttempt(sql, deliveryId, { ok, statusCode, error, final });
      if (ok) return { delivered: true, statusCode };
      log.warn({ deliveryId, endpointId: delivery.endpoint_id, attempt: job.attemptsMade + 1, statusCode, final }, 'webhook delivery failed');
      if (final) {
        if (
          await disableFailingEndpoint(
            sql,
            delivery.endpoint_id,
            delivery.created_at,
            `every attempt failed since ${delivery.created_at.toISOString()}; last: ${error}`,
          )
        ) {
          log.warn({ endpointId: delivery.endpoint_id }, 'webhook endpoint disabled after failing deliveries');
          await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'webhook-disabled', endpointId: delivery.endpoint_id });
        }
        throw new UnrecoverableError(`delivery failed for good: ${error}`);
      }
      throw new Error(`delivery failed: ${error}`);
    },
    { concurrency: 16 },
  );
}

/**
 * A repeatable job that re-queues pending deliveries whose job was lost (an edge or worker that died
 * between recording an event and queueing its deliveries). Re-adding a delivery that still has its
 * job is a no-op (the job id is the delivery id).
 */
export const webhookSweepJob: JobDeclaration<z.ZodObject<Record<string, never>>> = {
  queue: 'webhooks',
  name: 'webhook-sweep',
  payload: z.object({}).strict(),
  options: { attempts: 1, backoff: { type: 'fixed', delay: 60_000 }, removeOnComplete: 20, removeOnFail: 20 },
};

export function webhookSweepProcessor({ sql, redis, settings }: QueueDeps): QueueProcessor {
  return processorFor(webhookSweepJob, async () => {
    const stale = await listStalePendingDeliveries(sql, new Date(Date.now() - 60_000), 500);
    if (stale.length === 0) return { requeued: 0 };
    const queue = createQueue(webhookDeliveryJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX });
    try {
      await enqueueDeliveries(queue, settings, stale);
    } finally {
      await queue.close();
    }
    return { requeued: stale.length };
  });
}
