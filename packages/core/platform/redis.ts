import { Redis, type RedisOptions } from 'ioredis';

/**
 * A Redis client. `purpose` tunes it: BullMQ needs `maxRetriesPerRequest: null`; clients on a
 * request path fail fast instead of queueing commands while Redis is away.
 */
export function createRedis(url: string, purpose: 'request-path' | 'queue' | 'subscriber' = 'request-path', extra: RedisOptions = {}): Redis {
  const base: RedisOptions =
    purpose === 'queue' || purpose === 'subscriber'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 2_000, commandTimeout: 2_000 };
  const client = new Redis(url, { ...base, lazyConnect: false, ...extra });
  // Errors surface on the commands that fail; without a listener ioredis would print each reconnect.
  client.on('error', () => {});
  return client;
}
