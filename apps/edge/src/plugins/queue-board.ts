import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { PlatformError } from '#core/platform';
import { createRedis, createQueue } from '#core/platform';
import { sendError } from '../errors.js';
import { assertSameOrigin } from '../http/dashboard-session.js';
import { requireOperator } from '../http/operator-auth.js';

export const QUEUE_BOARD_PATH = '/admin/queues';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The BullMQ board for operators at /admin/queues, behind HTTP Basic auth (OPERATOR_BASIC_AUTH;
 * without it the board is not mounted). Queues are discovered from Redis on each visit, so every
 * queue the workers declare shows up without the edge having to know them. bull-board is loaded only
 * when the board is mounted (4.4 MB of heap that an edge without it does not carry).
 */
export default fp(
  async function queueBoardPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const credentials = settings.OPERATOR_BASIC_AUTH;
    if (!credentials) return;
    const [{ createBullBoard }, { BullMQAdapter }, { FastifyAdapter }] = await Promise.all([
      import('@bull-board/api'),
      import('@bull-board/api/bullMQAdapter'),
      import('@bull-board/fastify'),
    ]);

    const connection = createRedis(settings.REDIS_URL, 'queue', { lazyConnect: true });
    const queues = new Map<string, Queue>();
    const serverAdapter = new FastifyAdapter();
    serverAdapter.setBasePath(QUEUE_BOARD_PATH);
    const board = createBullBoard({ queues: [], serverAdapter });

    const refresh = async () => {
      const names = new Set<string>();
      let cursor = '0';
      do {
        const [next, keys] = await connection.scan(cursor, 'MATCH', `${settings.REDIS_PREFIX}:*:meta`, 'COUNT', 500);
        cursor = next;
        for (const key of keys) names.add(key.slice(settings.REDIS_PREFIX.length + 1, -':meta'.length));
      } while (cursor !== '0');
      for (const name of names) {
        if (!queues.has(name)) queues.set(name, createQueue(name, { connection, prefix: settings.REDIS_PREFIX }));
      }
      board.replaceQueues([...queues.values()].map((queue) => new BullMQAdapter(queue, { readOnlyMode: false })));
    };

    await app.register(async (scope) => {
      // bull-board installs its own error handler in this scope, so failures are answered here.
      scope.addHook('onRequest', async (request, reply) => {
        try {
          await requireOperator(request, reply, {
            expected: credentials,
            realm: 'queue board',
            surface: 'The queue board',
            rateLimiter: app.rateLimiter,
          });
        } catch (error) {
          return sendError(reply, error as PlatformError);
        }
        // Browsers resend Basic credentials on their own, so a page elsewhere could post to the
        // board's actions (pause, clean, retry): changes must come from the site's own origin.
        if (!SAFE_METHODS.has(request.method)) {
          try {
            assertSameOrigin(request, settings, { required: true });
          } catch (error) {
            return sendError(reply, error as PlatformError);
          }
        }
        if (request.url.startsWith(`${QUEUE_BOARD_PATH}/api/queues`)) await refresh();
      });
      await scope.register(serverAdapter.registerPlugin(), { prefix: QUEUE_BOARD_PATH });
    });
    app.addHook('onClose', async () => {
      await Promise.allSettled([...queues.values()].map((queue) => queue.close()));
      connection.disconnect();
    });
  },
  { name: 'queue-board', dependencies: ['deps', 'rate-limit'] },
);
