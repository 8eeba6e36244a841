import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { createRedis, createQueue } from '#core/platform';
import type { Queue } from 'bullmq';
import { refundChargeJob, UsageRecorder } from '#core/billing';

declare module 'fastify' {
  interface FastifyInstance {
    usage: UsageRecorder;
    /** Refunds Postgres refused when they were owed (see refundOrQueue). */
    refundQueue: Queue;
  }
}

/** The usage hand-off of metered calls (see UsageRecorder), flushed when the app closes, and the refund queue. */
export default fp(
  async function usagePlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    // Its own fail-fast connection: a Redis outage must not stall the request path.
    const redis = createRedis(settings.REDIS_URL, 'request-path', { enableOfflineQueue: false, connectionName: 'usage-handoff' }, app.log);
    const recorder = new UsageRecorder({
      sql,
      redis,
      prefix: settings.REDIS_PREFIX,
      batchSize: settings.USAGE_BATCH_SIZE,
      flushMs: settings.USAGE_FLUSH_MS,
      bufferMax: settings.USAGE_BUFFER_MAX,
      addTimeoutMs: settings.USAGE_QUEUE_TIMEOUT_MS,
      log: app.log,
    });
    app.decorate('usage', recorder);
    const refundQueue = createQueue(refundChargeJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX }, app.log);
    app.decorate('refundQueue', refundQueue);
    app.addHook('onClose', async () => {
      await recorder.close();
      await refundQueue.close();
      await redis.quit().catch(() => redis.disconnect());
    });
  },
  { name: 'usage', dependencies: ['deps'] },
);
