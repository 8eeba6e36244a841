import { UnrecoverableError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { JobDeclaration, Tracing } from '#core/platform';
import type { Sql } from '#db/sql';
import type { WorkerSettings } from '../settings.js';

/** What processors need from the outside world; built once by the worker process (and by tests). */
export interface QueueDeps {
  sql: Sql;
  redis: Redis;
  settings: WorkerSettings;
  log: Logger;
  /** The process's tracing, or null when it is off; the usage processor continues traced calls' traces. */
  tracing?: Tracing | null;
}

/** A processor attached to one declared job (core declares queue, payload and retry policy once). */
export interface QueueProcessor {
  job: JobDeclaration;
  /** Jobs processed at once; defaults to QUEUE_CONCURRENCY. */
  concurrency?: number;
  process: (job: Job) => Promise<unknown>;
}

/**
 * Attaches a handler to a declared job. The payload is validated against the declaration's schema
 * before the handler sees it; a payload that does not match can never succeed, so it fails with
 * UnrecoverableError instead of being retried. Handlers are small and idempotent.
 *
 * `deadlineMs`: a job whose handler has not settled by then fails (and is retried as declared)
 * instead of holding its place for ever: BullMQ keeps renewing the lock of a job its worker is still
 * processing, so a handler stuck on a connection that will never answer would leave the job active
 * while the worker lives. The handler is not stopped (it cannot be); being idempotent, a late finish
 * changes nothing the retry did not. What it holds meanwhile (a database connection, or its place in
 * the pool's queue) stays held, so every late attempt takes one more connection from the worker's pool
 * until it ends: the deadline is for what never ends, set well above a slow attempt, not a timeout.
 */
export function processorFor<P extends z.ZodType>(
  declaration: JobDeclaration<P>,
  handle: (payload: z.output<P>, job: Job) => Promise<unknown>,
  options: { concurrency?: number; deadlineMs?: number } = {},
): QueueProcessor {
  const { deadlineMs, ...rest } = options;
  return {
    job: declaration,
    ...rest,
    process: async (job) => {
      const parsed = declaration.payload.safeParse(job.data);
      if (!parsed.success) throw new UnrecoverableError(`invalid ${declaration.name} job: ${parsed.error.issues[0]?.message ?? 'bad payload'}`);
      const work = handle(parsed.data, job);
      return deadlineMs === undefined ? work : withinDeadline(work, deadlineMs, `${declaration.name} job ${job.id ?? '?'}`);
    },
  };
}

/** `work`, or a rejection once `ms` have passed without it settling (its own later outcome is then dropped). */
async function withinDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      work.catch(() => {});
      reject(new Error(`${what} did not finish within ${ms} ms; it fails now and is retried (its handler is idempotent)`));
    }, ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The handler of one queue's Worker: several declared jobs may share a queue (refunds and their
 * reconciler do), so each job goes to the processor of its name.
 */
export function queueHandler(processors: QueueProcessor[]): (job: Job) => Promise<unknown> {
  return async (job) => {
    const processor = processors.find((candidate) => candidate.job.name === job.name);
    if (!processor) throw new UnrecoverableError(`no processor for job ${job.name} on queue ${job.queueName}`);
    return processor.process(job);
  };
}

/** Processors grouped by queue, one Worker each. */
export function byQueue(processors: QueueProcessor[]): Map<string, QueueProcessor[]> {
  const groups = new Map<string, QueueProcessor[]>();
  for (const processor of processors) groups.set(processor.job.queue, [...(groups.get(processor.job.queue) ?? []), processor]);
  return groups;
}
