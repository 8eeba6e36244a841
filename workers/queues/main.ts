// The BullMQ worker process: one Worker per queue definition (usage aggregation, directory indexing).
import { Worker } from 'bullmq';
import pino from 'pino';
import { createRedis } from '#core/platform';
import { loadSettingsOrExit } from '#core/platform';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { queueProcessors } from './registry.js';

const settings = loadSettingsOrExit(loadWorkerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'queue-workers' } });
const sql = createSql(settings.DATABASE_URL, { max: 10, appName: 'queue-workers' });
const connection = createRedis(settings.REDIS_URL, 'queue', { connectionName: 'queue-workers' }, log);

const processors = queueProcessors({ sql, redis: connection, settings, log });
const workers = processors.map((processor) => {
  const queue = processor.job.queue;
  const worker = new Worker(queue, processor.process, {
    connection,
    prefix: settings.REDIS_PREFIX,
    concurrency: processor.concurrency ?? settings.QUEUE_CONCURRENCY,
  });
  worker.on('error', (error) => log.error({ err: error, queue }, 'queue worker error'));
  worker.on('failed', (job, error) => log.warn({ queue, jobId: job?.id, attemptsMade: job?.attemptsMade, err: error }, 'job failed'));
  return worker;
});

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  await Promise.allSettled([sql.end({ timeout: 5 }), connection.quit()]);
});
log.info({ queues: processors.map((p) => p.job.queue) }, 'queue workers running');
