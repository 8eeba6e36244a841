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
  options: { attempts: 10, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete: 1_000, removeOnFail: 10_000 },
};
