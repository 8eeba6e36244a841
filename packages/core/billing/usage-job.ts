import { usageBatchSchema } from '#db/usage';
import type { JobDeclaration } from '#core/platform';

/**
 * A batch of usage events from an edge, aggregated by the usage worker. Retried for about 15
 * minutes: the batch is written idempotently (events by id), so a retry never counts twice.
 */
export const usageBatchJob: JobDeclaration<typeof usageBatchSchema> = {
  queue: 'usage-events',
  name: 'usage-batch',
  payload: usageBatchSchema,
  // 17 attempts, each wait twice the last from 1 s: the last about 18 hours after the first, so a long
  // Postgres outage does not lose the outcomes of calls that were served.
  options: { attempts: 17, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete: 1_000, removeOnFail: 10_000 },
};
