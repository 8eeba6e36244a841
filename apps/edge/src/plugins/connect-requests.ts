import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ConnectRequestHub, type ConnectRequestDeps } from '#core/connect-requests';
import { emailJob } from '#core/notifications';
import { createQueue } from '#core/platform';

declare module 'fastify' {
  interface FastifyInstance {
    /** Connect requests: what the domain functions need, and this edge's hub (news and waiters). */
    connectRequests: ConnectRequestDeps & { hub: ConnectRequestHub };
  }
}

export default fp(
  async function connectRequestsPlugin(app: FastifyInstance) {
    const { sql, redis, settings } = app.deps;
    const emails = createQueue(emailJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX });
    const hub = new ConnectRequestHub({
      sql,
      redis,
      redisUrl: settings.REDIS_URL,
      prefix: settings.REDIS_PREFIX,
      publicUrl: settings.PUBLIC_URL,
      webhooks: app.webhooks,
      emails,
      log: app.log,
      // Waiters re-read as often as event streams beat: an announcement lost on the way costs at most this.
      recheckMs: settings.SSE_HEARTBEAT_MS,
    });
    app.decorate('connectRequests', { sql, notices: hub, publicUrl: settings.PUBLIC_URL, hub });
    // preClose: open waits end before the server waits for connections to drain.
    app.addHook('preClose', async () => hub.stop());
    app.addHook('onClose', async () => emails.close());
  },
  { name: 'connect-requests', dependencies: ['deps', 'webhook-emitter', 'event-streams'] },
);
