import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { emailJob } from '#core/notifications';
import { connectionNotifier, OAuthClients, OAuthConnectionCache, OAuthTokenSource, type OAuthDeps } from '#core/oauth';
import { createQueue } from '#core/platform';

declare module 'fastify' {
  interface FastifyInstance {
    /** Managed OAuth 2 (core/oauth): its dependencies, each edge's cache of connections, and the proxy's token source. */
    oauth: { deps: OAuthDeps; cache: OAuthConnectionCache; tokens: OAuthTokenSource };
  }
}

/**
 * The composition root of managed OAuth 2: one openid-client side (OAuthClients, its SSRF-guarded
 * agent), the cache of the accounts' connections the proxy reads (evicted on every edge through
 * Redis when they change), and the token source MeteredCall asks for a connection's bearer token.
 */
export default fp(
  async function oauthPlugin(app: FastifyInstance) {
    const { settings, sql, redis } = app.deps;
    const clients = new OAuthClients(settings);
    const cache = new OAuthConnectionCache(sql, {
      redisUrl: settings.REDIS_URL,
      redisPrefix: settings.REDIS_PREFIX,
      ttlMs: settings.CONNECTION_CACHE_TTL_MS,
    });
    cache.start();
    const emails = createQueue(emailJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX }, app.log);
    const deps: OAuthDeps = {
      sql,
      clients,
      settings,
      log: app.log,
      // The row is written already: a failed announcement does not fail the request; the other edges
      // then see the change within CONNECTION_CACHE_TTL_MS.
      announce: async (accountId, provider) => {
        try {
          await cache.changed(redis, accountId, provider);
        } catch (error) {
          app.log.warn(
            { err: error, provider },
            'OAuth connection change not announced to the other edges; they see it within CONNECTION_CACHE_TTL_MS',
          );
        }
      },
      // A connection that came to need a person, or works again: webhooks, and an e-mail for a failure.
      transition: connectionNotifier({ webhooks: app.webhooks, emails, publicUrl: settings.PUBLIC_URL, log: app.log }),
    };
    app.decorate('oauth', { deps, cache, tokens: new OAuthTokenSource(deps, cache) });
    app.addHook('onClose', async () => {
      cache.stop();
      await Promise.all([clients.close(), emails.close()]);
    });
  },
  { name: 'oauth', dependencies: ['deps', 'webhook-emitter'] },
);
