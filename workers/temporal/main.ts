// The Temporal worker process: runs the cookbook-session workflows and their activities.
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import pino from 'pino';
import { createRedis, temporalDataConverter, temporalTls, Tracing } from '#core/platform';
import { loadSettingsOrExit } from '#core/platform';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadWorkerSettings } from '../settings.js';
import { createActivities } from './activities.js';
import { temporalWorkerTracing } from './tracing.js';
import { serveMetrics, temporalWorkerRegistry } from '../metrics.js';

const settings = loadSettingsOrExit(loadWorkerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'temporal-worker' } });

// The SDK logs through its own logger; keep it at warnings unless debugging (the bundler is chatty at info).
const sdkLevel: LogLevel = settings.LOG_LEVEL === 'debug' || settings.LOG_LEVEL === 'trace' ? 'DEBUG' : 'WARN';
// The SDK's own metrics (task slots, polls, workflow and activity latencies) on TEMPORAL_METRICS_ADDRESS,
// served again as part of this worker's /metrics.
Runtime.install({
  logger: new DefaultLogger(sdkLevel),
  ...(settings.TEMPORAL_METRICS_ADDRESS
    ? {
        telemetryOptions: {
          metrics: {
            prometheus: { bindAddress: settings.TEMPORAL_METRICS_ADDRESS, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true },
          },
        },
      }
    : {}),
});

// Tracing (off unless OTEL_EXPORTER_OTLP_ENDPOINT is set): workflows, their updates and activities,
// continuing the traces the edge's Temporal client started.
const tracing = await Tracing.start({ service: 'platform-temporal-worker', settings, trustRemoteSampling: true, log });
if (tracing) log.info({ endpoint: settings.OTEL_EXPORTER_OTLP_ENDPOINT, ratio: settings.OTEL_TRACES_SAMPLER_ARG }, 'tracing on');

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
  ...temporalWorkerTracing(tracing),
});

const sdkMetrics = settings.TEMPORAL_METRICS_ADDRESS;
const metrics =
  settings.METRICS_PORT === null
    ? null
    : await serveMetrics(temporalWorkerRegistry(sql), {
        host: settings.METRICS_HOST,
        port: settings.METRICS_PORT,
        ...(sdkMetrics ? { extra: async () => (await fetch(`http://${sdkMetrics}/metrics`)).text() } : {}),
      });
if (metrics) log.info({ metrics: `http://${settings.METRICS_HOST}:${metrics.port}/metrics` }, 'metrics endpoint listening');

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  worker.shutdown();
  await metrics?.close();
});

log.info({ taskQueue: settings.TEMPORAL_TASK_QUEUE, address: settings.TEMPORAL_ADDRESS }, 'temporal worker polling');
try {
  await worker.run();
} finally {
  await connection.close();
  await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit(), tracing?.shutdown()]);
  log.info('temporal worker stopped');
}
