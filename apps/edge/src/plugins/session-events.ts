import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { SessionEventHub } from '#core/cookbooks';

declare module 'fastify' {
  interface FastifyInstance {
    /** The one reader of cookbook-session event streams on this edge instance. */
    sessionEvents: SessionEventHub;
  }
}

export default fp(
  async function sessionEventsPlugin(app: FastifyInstance) {
    const { settings, redis } = app.deps;
    const hub = new SessionEventHub({
      redisUrl: settings.REDIS_URL,
      prefix: settings.REDIS_PREFIX,
      reader: redis,
      heartbeatMs: settings.SSE_HEARTBEAT_MS,
    });
    app.decorate('sessionEvents', hub);
    // preClose: open streams end before the server waits for connections to drain.
    app.addHook('preClose', async () => hub.stop());
  },
  { name: 'session-events', dependencies: ['deps'] },
);
