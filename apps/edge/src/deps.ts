import type { Redis } from 'ioredis';
import { createRedis, type RedisErrorLog } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import type { EdgeSettings } from './config.js';
import { TemporalGateway, temporalDataConverter, temporalTls, type Tracing } from '#core/platform';

/** Everything the edge talks to. Built once per process (or per test app) and closed with the app. */
export interface EdgeDeps {
  settings: EdgeSettings;
  sql: Sql;
  /** Commands on the request path: rate limits, usage hand-off, event reads. */
  redis: Redis;
  temporal: TemporalGateway;
}

/** `tracing`: when on, the Temporal client's calls are traced into the workflows (Tracing.workflowClientInterceptor). */
export function createEdgeDeps(settings: EdgeSettings, log?: RedisErrorLog, tracing?: Tracing | null): EdgeDeps {
  return {
    settings,
    sql: createSql(settings.DATABASE_URL, { max: settings.DATABASE_POOL_MAX, appName: 'edge' }),
    redis: createRedis(settings.REDIS_URL, 'request-path', { connectionName: 'edge' }, log),
    temporal: new TemporalGateway(
      settings.TEMPORAL_ADDRESS,
      settings.TEMPORAL_NAMESPACE,
      settings.TEMPORAL_TASK_QUEUE,
      temporalDataConverter(settings.TEMPORAL_CODEC_KEYS),
      temporalTls(settings),
      tracing ? [tracing.workflowClientInterceptor()] : [],
    ),
  };
}

export async function closeEdgeDeps(deps: EdgeDeps): Promise<void> {
  await Promise.allSettled([deps.sql.end({ timeout: 5 }), deps.redis.quit().catch(() => deps.redis.disconnect()), deps.temporal.close()]);
}
