import { UnrecoverableError } from 'bullmq';
import { recordUsageEvents, USAGE_JOB_OPTIONS, USAGE_QUEUE, usageBatchSchema } from '#db/usage';
import type { QueueDefinition } from './definitions.js';
import type { QueueDeps } from './registry.js';

/**
 * Usage aggregation: each job is a batch of usage events from an edge. The batch is written in one
 * transaction that inserts the events by id (`on conflict do nothing`) and adds only the new ones to
 * the per account, API and day totals, so a retried job or a worker killed mid-batch never counts
 * an event twice.
 */
export function usageQueue(deps: Pick<QueueDeps, 'sql'>): QueueDefinition<typeof usageBatchSchema> {
  return {
    queue: USAGE_QUEUE,
    payload: usageBatchSchema,
    attempts: USAGE_JOB_OPTIONS.attempts,
    backoff: USAGE_JOB_OPTIONS.backoff,
    concurrency: 4,
    process: async (job) => {
      const parsed = usageBatchSchema.safeParse(job.data);
      if (!parsed.success) throw new UnrecoverableError(`invalid usage batch: ${parsed.error.issues[0]?.message ?? 'bad payload'}`);
      const inserted = await recordUsageEvents(deps.sql, parsed.data.events);
      return { events: parsed.data.events.length, inserted };
    },
  };
}
