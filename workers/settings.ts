import { z } from 'zod';
import { directorySettings } from '#core/directory';
import { emailSettings, webhookSettings } from '#core/notifications';
import { stripeSettings } from '#core/billing';
import { oauthRenewalSettings } from '#core/oauth';
import { isDevCodecKeys, isDevMasterKey, metricsSettings, tracingSettings } from '#core/platform';
import { envFlag, parseSettings, SettingsError, sharedSettings } from '#core/platform';

/** Settings of the worker processes (Temporal worker and BullMQ workers). */
export const workerSettings = sharedSettings
  .extend(directorySettings.shape)
  .extend(emailSettings.shape)
  .extend(webhookSettings.shape)
  .extend(stripeSettings.shape)
  .extend(metricsSettings.shape)
  .extend(tracingSettings.shape)
  .extend(oauthRenewalSettings.shape)
  .extend({
    /** Where the Temporal SDK serves its own metrics (host:port, loopback); the Temporal worker's /metrics includes them. Empty: off. */
    TEMPORAL_METRICS_ADDRESS: z
      .string()
      .regex(/^[\w.-]+:\d+$/)
      .optional()
      .or(z.literal(''))
      .transform((value) => value || null),
    /** Lets webhook deliveries reach loopback/private addresses: tests and local development only (refused in production). */
    ALLOW_PRIVATE_UPSTREAMS: envFlag.default(false),
    /** Jobs processed at once by each BullMQ worker. */
    QUEUE_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    /** Seconds a worker waits for jobs and activities in flight when asked to stop. */
    SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(1).max(600).default(20),
    /** A charge with no refund and no charged outcome this old is settled by the refund reconciler. */
    REFUND_RECONCILE_AFTER_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(7 * 86_400)
      .default(900),
    /** How often the refund reconciler runs. */
    REFUND_RECONCILE_EVERY_SECONDS: z.coerce.number().int().min(5).max(86_400).default(60),
    /**
     * An edge's credit hold expired longer ago than this is settled by the refund reconciler from the
     * usage events of its calls (the grace lets the last of them arrive through the usage queue).
     */
    CREDIT_HOLD_GRACE_SECONDS: z.coerce.number().int().min(0).max(86_400).default(30),
    /**
     * Usage events older than this are deleted (usage_daily keeps their totals; the p95 latency of
     * GET /usage/stats covers at most this window). At least 7 days: the refund reconciler reads them.
     */
    USAGE_EVENTS_RETENTION_DAYS: z.coerce.number().int().min(7).max(3_650).default(90),
    /** Step results and event streams of sessions ended longer ago than this are deleted (the session and step rows stay). */
    SESSION_DATA_RETENTION_DAYS: z.coerce.number().int().min(1).max(3_650).default(30),
    /** How often the retention job runs. */
    RETENTION_EVERY_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(7 * 86_400)
      .default(3_600),
  });

export type WorkerSettings = z.output<typeof workerSettings>;

export function loadWorkerSettings(env: NodeJS.ProcessEnv = process.env): WorkerSettings {
  const settings = parseSettings(workerSettings, env);
  // The directory import seals platform keys with it; the edge (which refuses the development key in
  // production) could not open keys sealed with another one.
  if (settings.NODE_ENV === 'production' && isDevMasterKey(settings.CONNECTIONS_MASTER_KEY)) {
    throw new SettingsError("CONNECTIONS_MASTER_KEY must be set to the edge's 32 random bytes (openssl rand -hex 32) in production");
  }
  if (settings.NODE_ENV === 'production' && settings.ALLOW_PRIVATE_UPSTREAMS) {
    throw new SettingsError('ALLOW_PRIVATE_UPSTREAMS=true is for tests only: in production webhooks must not reach private or loopback addresses');
  }
  if (settings.NODE_ENV === 'production' && isDevCodecKeys(settings.TEMPORAL_CODEC_KEYS)) {
    throw new SettingsError("TEMPORAL_CODEC_KEYS must be set to the edge's keys in production (id:64 hex digits): the default is public");
  }
  return settings;
}
