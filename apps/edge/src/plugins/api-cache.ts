import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiCache } from '#core/directory';
import { ConnectionCache } from '#core/gateway';

declare module 'fastify' {
  interface FastifyInstance {
    apiCache: ApiCache;
    connectionCache: ConnectionCache;
  }
}

/**
 * The proxy's in-process caches, each evicted on every edge through Redis pub/sub when its rows
 * change: the API rows it forwards to (ApiCache) and the callers' bring-your-own-key connections
 * (ConnectionCache).
 */
export default fp(
  async function apiCachePlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    const cache = new ApiCache(sql, { redisUrl: settings.REDIS_URL, redisPrefix: settings.REDIS_PREFIX, ttlMs: settings.API_CACHE_TTL_MS });
    cache.start();
    app.decorate('apiCache', cache);
    app.addHook('onClose', async () => cache.stop());
    const connections = new ConnectionCache(sql, {
      redisUrl: settings.REDIS_URL,
      redisPrefix: settings.REDIS_PREFIX,
      ttlMs: settings.CONNECTION_CACHE_TTL_MS,
    });
    connections.start();
    app.decorate('connectionCache', connections);
    app.addHook('onClose', async () => connections.stop());
  },
  { name: 'api-cache', dependencies: ['deps'] },
);
