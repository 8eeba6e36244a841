import { storeUsageEvents, usageBatchJob } from '#core/billing';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/**
 * Usage aggregation: each job is a batch of usage events from an edge. The batch is written in one
 * transaction that inserts the events by id (`on conflict do nothing`) and adds only the new ones to
 * the per account, API and day totals, so a retried job or a worker killed mid-batch never counts
 * an event twice. Paths are redacted on the way in (storeUsageEvents), off the edge's response path.
 */
export function usageProcessor(deps: Pick<QueueDeps, 'sql'>): QueueProcessor {
  return processorFor(
    usageBatchJob,
    async ({ events }) => {
      const inserted = await storeUsageEvents(deps.sql, events);
      return { events: events.length, inserted };
    },
    { concurrency: 4 },
  );
}
