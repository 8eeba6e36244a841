import type { JobsOptions, Queue } from 'bullmq';
import type { z } from 'zod';

/**
 * One BullMQ job, declared once: its queue, name, payload schema and retry policy. The producer adds
 * jobs with these options (BullMQ takes attempts and backoff from the job, not the worker) and the
 * worker attaches a processor to the same declaration, so the two can never disagree.
 */
export interface JobDeclaration<P extends z.ZodType = z.ZodType> {
  /** Queue name (prefixed with REDIS_PREFIX by BullMQ's `prefix` option). */
  queue: string;
  /** Job name inside the queue. */
  name: string;
  payload: P;
  options: JobsOptions & { attempts: number; backoff: { type: 'exponential' | 'fixed'; delay: number } };
}

/**
 * Adds one job of a declaration with the declared options (an explicit jobId on top). The payload is
 * typed here and validated by the worker before it is processed, so the producer's path (the edge
 * handing over usage batches) spends no CPU on validation.
 */
export async function addJob<P extends z.ZodType>(
  queue: Queue,
  declaration: JobDeclaration<P>,
  payload: z.input<P>,
  extra: Pick<JobsOptions, 'jobId' | 'delay'> = {},
): Promise<string | undefined> {
  const job = await queue.add(declaration.name, payload, { ...declaration.options, ...extra });
  return job.id;
}
