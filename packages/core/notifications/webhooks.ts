import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { addJob, openSecret, sealSecret, type JobDeclaration, createQueue, withTimeout } from '#core/platform';
import { getEmailPreferences, recordWebhookEvent, type WebhookSecretsRow } from '#db/webhooks';
import { addEmail, emailJob } from './email-job.js';
import type { Sql } from '#db/sql';

/**
 * Event types that may also be e-mailed to the account's owner (PUT /notifications/email). Human steps
 * have their own e-mails (to approvers too), and a failed automatic top-up is always e-mailed.
 */
export const EMAILABLE_EVENT_TYPES = [
  'balance.low',
  'balance.depleted',
  'topup.succeeded',
  'session.completed',
  'session.failed',
  'session.expired',
  'key.revoked',
] as const;

/** Every event type an endpoint can listen to. */
export const WEBHOOK_EVENT_TYPES = [
  'balance.low',
  'balance.depleted',
  'topup.succeeded',
  'topup.failed',
  'human_step.pending',
  'human_step.reminder',
  'human_step.rejected',
  'human_step.changes_requested',
  'session.completed',
  'session.failed',
  'session.expired',
  'key.revoked',
  'connection.requested',
  'connection.request_resolved',
  'connection.refresh_failed',
  'connection.recovered',
  'webhook.test',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Webhook settings shared by the edge (which records events) and the workers (which deliver them). */
export const webhookSettings = z.object({
  /** First retry delay of a failing delivery; each next one doubles (15 attempts from 10 s: the last about 45 hours after the first). */
  WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().min(10).max(3_600_000).default(10_000),
  WEBHOOK_ATTEMPTS: z.coerce.number().int().min(1).max(30).default(15),
  /** How long one delivery may take before it counts as failed. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  /** Endpoints per account. */
  WEBHOOK_MAX_ENDPOINTS: z.coerce.number().int().min(1).max(1000).default(20),
});
export type WebhookSettings = z.output<typeof webhookSettings>;

const deliveryPayload = z.object({ deliveryId: z.string().min(1).max(100) });

/** One delivery of one event to one endpoint; retried with exponential backoff (see webhookSettings). */
export const webhookDeliveryJob: JobDeclaration<typeof deliveryPayload> = {
  queue: 'webhooks',
  name: 'webhook-delivery',
  payload: deliveryPayload,
  options: { attempts: 15, backoff: { type: 'exponential', delay: 10_000 }, removeOnComplete: { age: 86_400 }, removeOnFail: { age: 7 * 86_400 } },
};

/** The Standard Webhooks secret format: whsec_ and base64 of 24 random bytes. */
export const newWebhookSecret = () => `whsec_${randomBytes(24).toString('base64')}`;
export const webhookSecretContext = (endpointId: string) => `webhook-secret:${endpointId}`;
export const sealWebhookSecret = (masterKey: Buffer, endpointId: string, secret: string) =>
  sealSecret(masterKey, secret, webhookSecretContext(endpointId));

/**
 * Signs a payload the Standard Webhooks way: `webhook-id`, `webhook-timestamp` and
 * `webhook-signature` (`v1,<base64>`; during a rotation the previous secret's signature too,
 * space-separated, so receivers holding either secret verify it).
 */
export function signWebhook(
  masterKey: Buffer,
  endpointId: string,
  secrets: WebhookSecretsRow,
  message: { id: string; body: string; at: Date },
): Record<string, string> {
  const sign = (sealed: Buffer) =>
    new Webhook(openSecret(masterKey, sealed, webhookSecretContext(endpointId))).sign(message.id, message.at, message.body);
  const signatures = [sign(secrets.secret_sealed)];
  if (secrets.previous_secret_sealed && secrets.previous_expires_at && secrets.previous_expires_at > message.at)
    signatures.push(sign(secrets.previous_secret_sealed));
  return {
    'webhook-id': message.id,
    'webhook-timestamp': String(Math.floor(message.at.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}

/** The job options for this deployment's retry settings (attempts and backoff from settings). */
export const deliveryJobOptions = (settings: Pick<WebhookSettings, 'WEBHOOK_ATTEMPTS' | 'WEBHOOK_RETRY_BASE_MS'>) => ({
  attempts: settings.WEBHOOK_ATTEMPTS,
  backoff: { type: 'exponential' as const, delay: settings.WEBHOOK_RETRY_BASE_MS },
});

/**
 * Adds delivery jobs. The job id is the delivery id, so adding one twice (the sweeper, a retried
 * emission) is a no-op; a manual retry gets an id of its own.
 */
export async function enqueueDeliveries(
  queue: Queue,
  settings: Pick<WebhookSettings, 'WEBHOOK_ATTEMPTS' | 'WEBHOOK_RETRY_BASE_MS'>,
  deliveryIds: string[],
  { manualRetry = false }: { manualRetry?: boolean } = {},
): Promise<void> {
  const declaration = { ...webhookDeliveryJob, options: { ...webhookDeliveryJob.options, ...deliveryJobOptions(settings) } };
  for (const deliveryId of deliveryIds) {
    await addJob(queue, declaration, { deliveryId }, { jobId: manualRetry ? `${deliveryId}-retry-${Date.now()}` : deliveryId });
  }
}

/**
 * Emits one event to the account's endpoints that listen to its type: the event and its deliveries
 * are recorded in Postgres (nothing is sent when no endpoint listens), then a delivery job is queued
 * per endpoint. A delivery whose job was lost is picked up by the sweeper. `id` makes emission
 * idempotent (a retried activity passes the same id).
 */
/** How long an emit waits for Redis to take its jobs. */
const ENQUEUE_TIMEOUT_MS = 3_000;

export class WebhookEmitter {
  private readonly queue: Queue;
  private emails: Queue | null = null;

  constructor(
    private readonly db: Sql,
    private readonly connection: Redis,
    private readonly prefix: string,
    private readonly settings: Pick<WebhookSettings, 'WEBHOOK_ATTEMPTS' | 'WEBHOOK_RETRY_BASE_MS'>,
  ) {
    this.queue = createQueue(webhookDeliveryJob.queue, { connection, prefix });
  }

  async emit(
    accountId: string,
    type: WebhookEventType,
    data: Record<string, unknown>,
    id = `msg_${randomBytes(12).toString('hex')}`,
  ): Promise<number> {
    const at = new Date().toISOString();
    const deliveries = await recordWebhookEvent(this.db, { id, accountId, type, payload: { type, timestamp: at, data } });
    // A queue waits for Redis as long as Redis is away, and an edge emits from inside a request (a
    // revoked key): the wait is bounded. The deliveries are recorded, so the sweeper queues them.
    await withTimeout(
      enqueueDeliveries(this.queue, this.settings, deliveries),
      ENQUEUE_TIMEOUT_MS,
      'queueing webhook deliveries (recorded: the sweeper queues them)',
    );
    // The same event by e-mail, when the account asked for this type (the job id is the event id).
    if ((EMAILABLE_EVENT_TYPES as readonly string[]).includes(type)) {
      const preferences = await getEmailPreferences(this.db, accountId);
      if (preferences?.eventTypes.includes(type)) {
        this.emails ??= createQueue(emailJob.queue, { connection: this.connection, prefix: this.prefix });
        await withTimeout(
          addEmail(this.emails, { kind: 'account-event', accountId, eventId: id, type, data }),
          ENQUEUE_TIMEOUT_MS,
          'queueing the event e-mail',
        );
      }
    }
    return deliveries.length;
  }

  async close(): Promise<void> {
    await Promise.all([this.queue.close(), this.emails?.close()]);
  }
}
