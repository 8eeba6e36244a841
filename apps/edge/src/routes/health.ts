import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';

const check = z.enum(['up', 'down']);
const healthBody = z.object({
  ok: z.boolean(),
  status: z.enum(['healthy', 'degraded']),
  checks: z.object({
    postgres: check,
    redis: check,
    temporal: check,
    /** The directory ranking process search and discovery come from; absent when this edge ranks in process. */
    directory: check.optional(),
  }),
  error: z.string().optional(),
  code: z.string().optional(),
  hint: z.string().optional(),
});

async function probe(fn: () => Promise<unknown>, timeoutMs = 1_500): Promise<'up' | 'down'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return 'up';
  } catch {
    return 'down';
  } finally {
    clearTimeout(timer);
  }
}

/**
 * GET /health: checks Postgres, Redis, Temporal and (when the edge uses one) the directory ranking
 * process for real; 503 "degraded" when any is down.
 */
const healthRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/health',
    {
      schema: {
        tags: ['platform'],
        summary: 'Service health, with a check of each dependency',
        response: { 200: healthBody, 503: healthBody },
      },
      // Load balancers probe this often; it is never rate limited.
      config: { rateLimit: false },
    },
    async (_request, reply) => {
      const { sql, redis, temporal } = app.deps;
      const remote = app.remoteRanking;
      const [postgres, redisState, temporalState, directory] = await Promise.all([
        probe(() => sql`select 1`),
        probe(() => redis.ping()),
        probe(() => temporal.check()),
        remote ? probe(() => remote.check()) : undefined,
      ]);
      const checks = { postgres, redis: redisState, temporal: temporalState, ...(directory ? { directory } : {}) };
      const down = Object.entries(checks)
        .filter(([, state]) => state === 'down')
        .map(([name]) => name);
      if (down.length === 0) return { ok: true, status: 'healthy' as const, checks };
      return reply.code(503).send({
        ok: false,
        status: 'degraded' as const,
        checks,
        error: `Unavailable: ${down.join(', ')}`,
        code: 'service_unavailable',
        hint: 'Retry after a short delay; operators should check the named dependencies.',
      });
    },
  );
};

export default healthRoutes;
