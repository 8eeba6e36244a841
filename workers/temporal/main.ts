// The Temporal worker process: runs the cookbook-session workflows and their activities.
import { fileURLToPath } from 'node:url';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import pino from 'pino';
import { createRedis } from '../../db/src/redis.js';
import { SettingsError } from '../../db/src/settings.js';
import { createSql } from '../../db/src/sql.js';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { createActivities } from './activities.js';

let settings;
try {
  settings = loadWorkerSettings();
} catch (error) {
  console.error(error instanceof SettingsError ? error.message : error);
  process.exit(1);
}
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'temporal-worker' } });

// The SDK's own log lines (worker lifecycle, activity failures, workflow task errors) go through
// pino like everything else; the Rust core forwards only its warnings and errors.
const sdkLog = log.child({ component: 'temporal-sdk' });
const levels = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;
Runtime.install({
  logger: {
    log: (level: LogLevel, message: string, meta?: LogMetadata) => sdkLog[levels[level]](meta ?? {}, message),
    trace: (message: string, meta?: LogMetadata) => sdkLog.trace(meta ?? {}, message),
    debug: (message: string, meta?: LogMetadata) => sdkLog.debug(meta ?? {}, message),
    info: (message: string, meta?: LogMetadata) => sdkLog.info(meta ?? {}, message),
    warn: (message: string, meta?: LogMetadata) => sdkLog.warn(meta ?? {}, message),
    error: (message: string, meta?: LogMetadata) => sdkLog.error(meta ?? {}, message),
  },
  telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
});

const sql = createSql(settings.DATABASE_URL, { max: 10, appName: 'temporal-worker' });
const redis = createRedis(settings.REDIS_URL, 'queue');
const connection = await NativeConnection.connect({ address: settings.TEMPORAL_ADDRESS });
const worker = await Worker.create({
  connection,
  namespace: settings.TEMPORAL_NAMESPACE,
  taskQueue: settings.TEMPORAL_TASK_QUEUE,
  workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
  activities: createActivities({ sql, redis, redisPrefix: settings.REDIS_PREFIX }),
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
