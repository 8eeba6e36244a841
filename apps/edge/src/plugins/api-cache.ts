import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiCache } from '#core/directory';

declare module 'fastify' {
  interface FastifyInstance {
    apiCache: ApiCache;
  }
}

/** The in-process cache of the API rows the proxy forwards to (see ApiCache). */
export default fp(
  async function apiCachePlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    const cache = new ApiCache(sql, { redisUrl: settings.REDIS_URL, redisPrefix: settings.REDIS_PREFIX, ttlMs: settings.API_CACHE_TTL_MS });
    await cache.start();
    app.decorate('apiCache', cache);
    app.addHook('onClose', async () => cache.stop());
  },
  { name: 'api-cache', dependencies: ['deps'] },
);
