import type { Job } from 'bullmq';
import type { z } from 'zod';

/**
 * One BullMQ queue and its job: name, payload schema, retry policy and processor, declared in one
 * place. Jobs are small and idempotent; a failure a retry cannot fix throws UnrecoverableError.
 */
export interface QueueDefinition<P extends z.ZodType = z.ZodType> {
  /** Queue name (prefixed with REDIS_PREFIX by BullMQ's `prefix` option). */
  queue: string;
  payload: P;
  attempts: number;
  backoff: { type: 'exponential' | 'fixed'; delay: number };
  /** Jobs processed at once; defaults to QUEUE_CONCURRENCY. */
  concurrency?: number;
  process: (job: Job<z.output<P>>) => Promise<unknown>;
}
