// The Temporal worker process: runs the cookbook-session workflows and their activities.
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import pino from 'pino';
import { createRedis, temporalDataConverter, temporalTls } from '#core/platform';
import { loadSettingsOrExit } from '#core/platform';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { createActivities } from './activities.js';

const settings = loadSettingsOrExit(loadWorkerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'temporal-worker' } });

// The SDK logs through its own logger; keep it at warnings unless debugging (the bundler is chatty at info).
const sdkLevel: LogLevel = settings.LOG_LEVEL === 'debug' || settings.LOG_LEVEL === 'trace' ? 'DEBUG' : 'WARN';
Runtime.install({ logger: new DefaultLogger(sdkLevel) });

const sql = createSql(settings.DATABASE_URL, { max: 10, appName: 'temporal-worker' });
const redis = createRedis(settings.REDIS_URL, 'queue', { connectionName: 'temporal-worker' }, log);
const tls = temporalTls(settings);
const connection = await NativeConnection.connect({ address: settings.TEMPORAL_ADDRESS, ...(tls ? { tls } : {}) });
const worker = await Worker.create({
  connection,
  namespace: settings.TEMPORAL_NAMESPACE,
  taskQueue: settings.TEMPORAL_TASK_QUEUE,
  workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  // Encrypts what the workflows store in Temporal (resultData, anything a person typed): payload-codec.ts.
  dataConverter: temporalDataConverter(settings.TEMPORAL_CODEC_KEYS),
  activities: createActivities({ sql, redis, redisPrefix: settings.REDIS_PREFIX, webhooks: settings }),
});

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  worker.shutdown();
});

log.info({ taskQueue: settings.TEMPORAL_TASK_QUEUE, address: settings.TEMPORAL_ADDRESS }, 'temporal worker polling');
try {
  await worker.run();
} finally {
  await connection.close();
  await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit()]);
  log.info('temporal worker stopped');
}
