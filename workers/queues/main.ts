// The BullMQ worker process: one Worker per queue (usage aggregation, directory indexing, refunds),
// each job handed to the processor of its declared name; the refund and auto top-up reconcilers,
// retention, the webhook sweep and the OAuth token renewal are repeatable jobs.
import { Worker } from 'bullmq';
import pino from 'pino';
import { reconcileAutoTopupsJob, reconcileRefundsJob } from '#core/billing';
import { oauthRenewalJob } from '#core/oauth';
import { createRedis, loadSettingsOrExit, createQueue, Tracing } from '#core/platform';
import { tablesWithoutAutovacuum } from '#db/retention';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { byQueue, queueHandler } from './definitions.js';
import { queueProcessors } from './registry.js';
import { retentionJob, scheduleRetention } from './retention.js';
import { webhookSweepJob } from './webhooks.js';
import { queueWorkerRegistry, serveMetrics } from '../metrics.js';

const settings = loadSettingsOrExit(loadWorkerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'queue-workers' } });
const sql = createSql(settings.DATABASE_URL, { max: 10, appName: 'queue-workers' });
const connection = createRedis(settings.REDIS_URL, 'queue', { connectionName: 'queue-workers' }, log);

// Said once at start (docs/OPERATIONS.md, "Production checklist"): without vacuum the tables every call
// writes slow down as they grow. A Postgres not up yet is the rest of the start's to report.
const unvacuumed = await tablesWithoutAutovacuum(sql).catch((error: unknown) => {
  log.debug({ err: error }, 'could not check whether autovacuum runs');
  return [];
});
if (unvacuumed.length > 0)
  log.warn(
    { tables: unvacuumed },
    'Postgres autovacuum is off for the tables every metered call writes: dead row versions and stale planner statistics will slow charges and usage as they grow; turn autovacuum on, or run VACUUM ANALYZE on them regularly',
  );

const tracing = await Tracing.start({ service: 'platform-queue-worker', settings, trustRemoteSampling: true, log });
if (tracing) log.info({ endpoint: settings.OTEL_EXPORTER_OTLP_ENDPOINT, ratio: settings.OTEL_TRACES_SAMPLER_ARG }, 'tracing on');
const processors = queueProcessors({ sql, redis: connection, settings, log, tracing });
const queueWorkers: Array<{ queue: string; worker: Worker }> = [];
const workers = [...byQueue(processors)].map(([queue, list]) => {
  const worker = new Worker(queue, queueHandler(list), {
    connection,
    prefix: settings.REDIS_PREFIX,
    concurrency: Math.max(...list.map((processor) => processor.concurrency ?? settings.QUEUE_CONCURRENCY)),
  });
  worker.on('error', (error) => log.error({ err: error, queue }, 'queue worker error'));
  worker.on('failed', (job, error) => log.warn({ queue, job: job?.name, jobId: job?.id, attemptsMade: job?.attemptsMade, err: error }, 'job failed'));
  queueWorkers.push({ queue, worker });
  return worker;
});

// Queue depths and job outcomes for Prometheus, on a port of their own (METRICS_PORT).
const observed = [...byQueue(processors).keys()].map((name) => createQueue(name, { connection, prefix: settings.REDIS_PREFIX }));
const metrics =
  settings.METRICS_PORT === null
    ? null
    : await serveMetrics(queueWorkerRegistry(observed, queueWorkers), { host: settings.METRICS_HOST, port: settings.METRICS_PORT });
if (metrics) log.info({ metrics: `http://${settings.METRICS_HOST}:${metrics.port}/metrics` }, 'metrics endpoint listening');

// One schedule however many worker processes run (an upsert by id).
const refunds = createQueue(reconcileRefundsJob.queue, { connection, prefix: settings.REDIS_PREFIX });
await refunds.upsertJobScheduler(
  reconcileRefundsJob.name,
  { every: settings.REFUND_RECONCILE_EVERY_SECONDS * 1000 },
  { name: reconcileRefundsJob.name, data: {}, opts: reconcileRefundsJob.options },
);

const maintenance = createQueue(retentionJob.queue, { connection, prefix: settings.REDIS_PREFIX });
await scheduleRetention(maintenance, settings.RETENTION_EVERY_SECONDS);

// Auto top-ups whose Stripe webhook never came are asked about (payments pending for half an hour).
const billing = createQueue(reconcileAutoTopupsJob.queue, { connection, prefix: settings.REDIS_PREFIX });
await billing.upsertJobScheduler(
  reconcileAutoTopupsJob.name,
  { every: 600_000 },
  { name: reconcileAutoTopupsJob.name, data: {}, opts: reconcileAutoTopupsJob.options },
);

// Deliveries whose job was lost (a process died between recording and queueing) are re-queued.
const webhooks = createQueue(webhookSweepJob.queue, { connection, prefix: settings.REDIS_PREFIX });
await webhooks.upsertJobScheduler(webhookSweepJob.name, { every: 60_000 }, { name: webhookSweepJob.name, data: {}, opts: webhookSweepJob.options });

// OAuth access tokens renewed ahead of expiry, and idle refresh tokens kept alive (docs/OPERATIONS.md).
const oauth = createQueue(oauthRenewalJob.queue, { connection, prefix: settings.REDIS_PREFIX });
await oauth.upsertJobScheduler(
  oauthRenewalJob.name,
  { every: settings.OAUTH_RENEW_EVERY_SECONDS * 1000 },
  { name: oauthRenewalJob.name, data: {}, opts: oauthRenewalJob.options },
);

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  await Promise.all([
    refunds.close(),
    maintenance.close(),
    webhooks.close(),
    billing.close(),
    oauth.close(),
    ...observed.map((queue) => queue.close()),
    metrics?.close(),
  ]);
  await Promise.allSettled([sql.end({ timeout: 5 }), connection.quit(), tracing?.shutdown()]);
});
log.info({ queues: [...byQueue(processors).keys()] }, 'queue workers running');
