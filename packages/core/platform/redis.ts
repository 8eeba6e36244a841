import { Redis, type RedisOptions } from 'ioredis';

/** The part of a pino/Fastify logger a Redis client reports its connection errors to. */
export interface RedisErrorLog {
  warn(object: Record<string, unknown>, message: string): void;
}

/**
 * Reports a client's connection errors without flooding: the first error of an outage is logged,
 * then at most one line per `everyMs` while it lasts, with how many were folded in; `ready` ends the
 * outage (and says so). Without a log the errors still surface on the commands that fail.
 */
export function reportRedisErrors(client: Redis, log: RedisErrorLog | undefined, name: string, everyMs = 10_000): void {
  let lastLoggedAt = 0;
  let folded = 0;
  let down = false;
  client.on('error', (error: Error) => {
    if (!log) return;
    const now = Date.now();
    if (down && now - lastLoggedAt < everyMs) {
      folded += 1;
      return;
    }
    log.warn({ redis: name, err: { message: error.message, code: (error as { code?: string }).code }, repeated: folded }, 'redis connection error');
    down = true;
    lastLoggedAt = now;
    folded = 0;
  });
  client.on('ready', () => {
    if (down && log) log.warn({ redis: name }, 'redis connection back');
    down = false;
    folded = 0;
  });
}

/**
 * A Redis client. `purpose` tunes it: BullMQ needs `maxRetriesPerRequest: null`; clients on a
 * request path fail fast instead of queueing commands while Redis is away. Connection errors go to
 * `log` (rate-limited, see reportRedisErrors).
 */
export function createRedis(
  url: string,
  purpose: 'request-path' | 'queue' | 'subscriber' = 'request-path',
  extra: RedisOptions = {},
  log?: RedisErrorLog,
): Redis {
  const base: RedisOptions =
    purpose === 'queue' || purpose === 'subscriber'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 2_000, commandTimeout: 2_000 };
  const client = new Redis(url, { ...base, lazyConnect: false, ...extra });
  reportRedisErrors(client, log, extra.connectionName ?? purpose);
  return client;
}
