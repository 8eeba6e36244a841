import { Worker, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import type { Sql } from '#db/sql';
import { webhookDeliveryProcessor } from '#workers/queues/webhooks';
import { loadWorkerSettings } from '#workers/settings';
import { testDatabaseUrl } from './settings.js';

/** The webhook delivery processor on a BullMQ worker of the test's own. */
export function startWebhookWorker(input: {
  sql: Sql;
  redis: Redis;
  redisPrefix: string;
  allowPrivate?: boolean;
  env?: Record<string, string>;
  options?: Partial<WorkerOptions>;
}): Worker {
  const settings = loadWorkerSettings({
    ...process.env,
    DATABASE_URL: testDatabaseUrl(),
    REDIS_PREFIX: input.redisPrefix,
    ALLOW_PRIVATE_UPSTREAMS: input.allowPrivate === false ? 'false' : 'true',
    WEBHOOK_TIMEOUT_MS: '3000',
    ...input.env,
  });
  const processor = webhookDeliveryProcessor({ sql: input.sql, redis: input.redis, settings, log: pino({ level: 'silent' }) });
  const worker = new Worker(processor.job.queue, processor.process, {
    connection: input.redis,
    prefix: input.redisPrefix,
    concurrency: 4,
    ...input.options,
  });
  worker.on('error', () => {});
  return worker;
}
