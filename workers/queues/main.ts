// The BullMQ worker process: one Worker per queue definition (usage aggregation, directory indexing).
import { Worker } from 'bullmq';
import pino from 'pino';
import { createRedis } from '#core/platform';
import { loadSettingsOrExit } from '#core/platform';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { queueDefinitions } from './registry.js';

const settings = loadSettingsOrExit(loadWorkerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'queue-workers' } });
const sql = createSql(settings.DATABASE_URL, { max: 10, appName: 'queue-workers' });
const connection = createRedis(settings.REDIS_URL, 'queue');

const definitions = queueDefinitions({ sql, redis: connection, settings, log });
const workers = definitions.map((definition) => {
  const worker = new Worker(definition.queue, async (job) => definition.process(job), {
    connection,
    prefix: settings.REDIS_PREFIX,
    concurrency: definition.concurrency ?? settings.QUEUE_CONCURRENCY,
  });
  worker.on('error', (error) => log.error({ err: error, queue: definition.queue }, 'queue worker error'));
  worker.on('failed', (job, error) => log.warn({ queue: definition.queue, jobId: job?.id, err: error }, 'job failed'));
  return worker;
});

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  await Promise.allSettled([sql.end({ timeout: 5 }), connection.quit()]);
});
log.info({ queues: definitions.map((d) => d.queue) }, 'queue workers running');
