import { apiUsageReport, usageStats, usageSummary, type UsageTotals } from '#core/billing';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { toDollars } from '#contracts/money';
import { requireAuth } from '../plugins/auth.js';
import { apiId as API_ID } from '#contracts/directory';
import { operation, restDoor } from '../http/operation.js';

const DAYS = z.coerce
  .number({ message: 'days must be an integer from 1 to 365' })
  .int('days must be an integer from 1 to 365')
  .min(1, 'days must be at least 1')
  .max(365, 'days must be at most 365')
  .default(30)
  .describe('Number of UTC days, today included (default 30, max 365)');
const daysQuery = z.object({ days: DAYS });

const totals = z.object({ calls: z.number(), cost: z.number(), errors: z.number() });
const day = totals.extend({ date: z.string() });
const present = (t: UsageTotals) => ({ calls: t.calls, cost: toDollars(t.costMicros), errors: t.errors });

/** GET /usage and the get_usage tool. */
export const readUsage = operation({ querystring: daysQuery }, async (app, door, { query }) => {
  const { days } = query;
  const summary = await usageSummary(app.deps.sql, door.caller.accountId, days);
  return {
    ok: true as const,
    days,
    totals: present(summary.totals),
    byDay: summary.byDay.map((d) => ({ date: d.date, ...present(d) })),
    byApi: summary.byApi.map((a) => ({ apiId: a.apiId, ...present(a) })),
  };
});

/** Usage read from the usage worker's aggregates; it may lag the ledger by seconds. */
const usageRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/usage',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['usage'],
        summary: 'Usage summary of metered calls per day and per API',
        querystring: readUsage.schemas.querystring,
        response: {
          200: z.object({ ok: z.literal(true), days: z.number(), totals, byDay: z.array(day), byApi: z.array(totals.extend({ apiId: z.string() })) }),
        },
      },
    },
    async (request, reply) => readUsage.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/usage/stats',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['usage'],
        summary: 'Aggregate usage statistics',
        querystring: daysQuery,
        response: {
          200: z.object({
            ok: z.literal(true),
            days: z.number(),
            stats: z.object({
              totalCalls: z.number(),
              totalCost: z.number(),
              errorRate: z.number(),
              avgLatencyMs: z.number(),
              p95LatencyMs: z.number(),
              topApis: z.array(z.object({ apiId: z.string(), calls: z.number(), cost: z.number() })),
            }),
          }),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { days } = request.query;
      const s = await usageStats(request.server.deps.sql, auth.accountId, days);
      return {
        ok: true as const,
        days,
        stats: {
          totalCalls: s.totalCalls,
          totalCost: toDollars(s.totalCostMicros),
          errorRate: s.errorRate,
          avgLatencyMs: s.avgLatencyMs,
          p95LatencyMs: s.p95LatencyMs,
          topApis: s.topApis.map((t) => ({ apiId: t.apiId, calls: t.calls, cost: toDollars(t.costMicros) })),
        },
      };
    },
  );

  app.get(
    '/usage/:apiId',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['usage'],
        summary: 'Usage of one API per day',
        params: z.object({ apiId: API_ID }),
        querystring: daysQuery,
        response: { 200: z.object({ ok: z.literal(true), apiId: z.string(), days: z.number(), totals, byDay: z.array(day) }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { apiId } = request.params;
      const { days } = request.query;
      const usage = await apiUsageReport(request.server.deps.sql, auth.accountId, apiId, days);
      return { ok: true as const, apiId, days, totals: present(usage.totals), byDay: usage.byDay.map((d) => ({ date: d.date, ...present(d) })) };
    },
  );
};

export default usageRoutes;
