import type { Queue } from 'bullmq';
import { z } from 'zod';
import { sessionEventsKey } from '#core/cookbooks';
import { FEEDBACK_WINDOW_DAYS } from '#core/directory';
import { pruneDiscoveryListings } from '#db/discovery-feedback';
import type { JobDeclaration } from '#core/platform';
import { pruneProviderModels } from '#db/oauth-provider';
import { pruneDashboardSessions, pruneEndedSessions, pruneUsageEvents } from '#db/retention';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

const DAY_MS = 86_400_000;
/** Rows per statement, and statements per table per run: one run stays short, a backlog takes several. */
const BATCH = 5_000;
const MAX_BATCHES = 40;

/**
 * Retention, a repeatable job of the queue workers (the scheduler and the processor are both here,
 * so it is declared here rather than in a core context): usage events past
 * USAGE_EVENTS_RETENTION_DAYS (usage_daily keeps their totals), the step results and event streams
 * of sessions ended more than SESSION_DATA_RETENTION_DAYS ago, and dashboard sessions a day past
 * their expiry or revocation, and the authorization server's expired rows (codes, tokens, grants,
 * sessions, interactions of MCP clients' OAuth), and what discovery listed to accounts once older than
 * its feedback window (FEEDBACK_WINDOW_DAYS, a day's margin added). The ledger is never pruned.
 */
export const retentionJob: JobDeclaration<z.ZodObject<Record<string, never>>> = {
  queue: 'maintenance',
  name: 'retention',
  payload: z.object({}).strict(),
  options: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 }, removeOnComplete: 50, removeOnFail: 50 },
};

export interface RetentionReport {
  usageEvents: number;
  sessions: number;
  eventStreams: number;
  dashboardSessions: number;
  /** Expired codes, tokens, sessions and interactions of the platform's authorization server (MCP clients' OAuth). */
  oauthProviderModels: number;
  /** Discovery listings past the feedback window. */
  discoveryListings: number;
}

async function drain(step: () => Promise<number>): Promise<number> {
  let total = 0;
  for (let round = 0; round < MAX_BATCHES; round += 1) {
    const done = await step();
    total += done;
    if (done < BATCH) break;
  }
  return total;
}

export async function runRetention(
  { sql, redis, settings }: Pick<QueueDeps, 'sql' | 'redis' | 'settings'>,
  now: Date = new Date(),
): Promise<RetentionReport> {
  const usageBefore = new Date(now.getTime() - settings.USAGE_EVENTS_RETENTION_DAYS * DAY_MS);
  const sessionsBefore = new Date(now.getTime() - settings.SESSION_DATA_RETENTION_DAYS * DAY_MS);
  const usageEvents = await drain(() => pruneUsageEvents(sql, usageBefore, BATCH));
  let sessions = 0;
  let eventStreams = 0;
  await drain(async () => {
    const ids = await pruneEndedSessions(sql, sessionsBefore, BATCH);
    sessions += ids.length;
    if (ids.length > 0) eventStreams += await redis.del(...ids.map((id) => sessionEventsKey(settings.REDIS_PREFIX, id)));
    return ids.length;
  });
  const dashboardSessions = await drain(() => pruneDashboardSessions(sql, new Date(now.getTime() - DAY_MS), BATCH));
  const oauthProviderModels = await drain(() => pruneProviderModels(sql, now, BATCH));
  const listingsBefore = new Date(now.getTime() - (FEEDBACK_WINDOW_DAYS + 1) * DAY_MS);
  const discoveryListings = await drain(() => pruneDiscoveryListings(sql, listingsBefore, BATCH));
  return { usageEvents, sessions, eventStreams, dashboardSessions, oauthProviderModels, discoveryListings };
}

export function retentionProcessor(deps: QueueDeps): QueueProcessor {
  return processorFor(
    retentionJob,
    async () => {
      const report = await runRetention(deps);
      if (Object.values(report).some((count) => count > 0)) deps.log.info(report, 'retention pruned old data');
      return report;
    },
    { concurrency: 1 },
  );
}

/** One schedule however many worker processes run (an upsert by id). */
export async function scheduleRetention(queue: Queue, everySeconds: number): Promise<void> {
  await queue.upsertJobScheduler(
    retentionJob.name,
    { every: everySeconds * 1000 },
    { name: retentionJob.name, data: {}, opts: retentionJob.options },
  );
}
