import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { z } from 'zod';
import { withTimeout } from './timeout.js';

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

/** How long adding a job waits for Redis by default (see addJob). */
export const ADD_JOB_TIMEOUT_MS = 5_000;

/**
 * Adds one job of a declaration with the declared options (an explicit jobId on top). The payload is
 * typed here and validated by the worker before it is processed, so the producer's path (the edge
 * handing over usage batches) spends no CPU on validation.
 *
 * A BullMQ `add` waits for Redis for as long as Redis is away, whatever the connection's own
 * timeouts; this one gives up after `timeoutMs` (the add itself goes on, and lands if Redis comes
 * back). A caller that gives up must therefore be safe against the job arriving late: a fixed job
 * id, or a job that checks it is still wanted (auto top-up), or a record another process settles.
 */
export async function addJob<P extends z.ZodType>(
  queue: Queue,
  declaration: JobDeclaration<P>,
  payload: z.input<P>,
  extra: Pick<JobsOptions, 'jobId' | 'delay'> = {},
  timeoutMs = ADD_JOB_TIMEOUT_MS,
): Promise<string | undefined> {
  const job = await withTimeout(
    queue.add(declaration.name, payload, { ...declaration.options, ...extra }),
    timeoutMs,
    `queueing a ${declaration.name} job (is Redis reachable?)`,
  );
  return job.id;
}

/** Connection failures a queue repeats from its Redis client, which reports them itself (reportRedisErrors). */
const CONNECTION_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * A BullMQ queue for adding jobs, on a shared Redis connection. BullMQ prints every error event of
 * a queue without a listener to stderr: while Redis is away, one unstructured trace per reconnect
 * attempt, repeating what the connection's own rate-limited log line (reportRedisErrors) already
 * says. Here connection failures are left to that line, and any other error goes to `log` (or, with
 * none, to stderr as before).
 *
 * The queue skips BullMQ's Redis version check: it sends INFO once, when the queue is made, and
 * BullMQ keeps that command's failure for the queue's life (its connection's `initializing` promise),
 * so a request-path client's 2 s command timeout hit at that moment (Redis slow to answer, or the
 * event loop held for longer) made every later add of the queue fail until the process restarted.
 * Seen in the suite on a loaded two-core host: an app's webhook and e-mail adds all failing after
 * one such stall. The platform runs on Redis 7 (README), above the 5.0 that BullMQ's check asks for.
 */
export function createQueue(
  name: string,
  options: { connection: Redis; prefix: string },
  log?: { warn(object: Record<string, unknown>, message: string): void },
): Queue {
  const queue = new Queue(name, { ...options, skipVersionCheck: true });
  queue.on('error', (error: Error & { code?: string }) => {
    if ((error.code !== undefined && CONNECTION_ERRORS.has(error.code)) || error.message === 'Connection is closed.') return;
    if (log) log.warn({ err: error, queue: name }, 'queue error');
    else console.error(error);
  });
  return queue;
}
