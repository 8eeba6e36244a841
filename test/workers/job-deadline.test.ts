import { Queue, QueueEvents, Worker } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRedis, type JobDeclaration } from '#core/platform';
import { processorFor } from '#workers/queues/definitions';
import { uniqueId } from '../helpers/settings.js';

// A handler that never settles (a statement on a connection that will never answer) must not keep its
// job active for ever: BullMQ renews the lock of a job its worker is still processing. With a deadline
// the job fails, is retried as declared, and its retry finishes it. Real Redis, a real Worker.

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = uniqueId('deadline');
const connection = createRedis(redisUrl, 'queue');
const closers: Array<() => Promise<unknown>> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
  connection.disconnect();
});

describe('processorFor with deadlineMs', () => {
  it('fails a job whose handler hangs past its deadline; the retry finishes it', async () => {
    const declaration: JobDeclaration<z.ZodObject<{ n: z.ZodNumber }>> = {
      queue: uniqueId('hang-q'),
      name: 'hang',
      payload: z.object({ n: z.number() }),
      options: { attempts: 3, backoff: { type: 'fixed', delay: 10 } },
    };
    const calls: number[] = [];
    const processor = processorFor(
      declaration,
      async ({ n }, job) => {
        calls.push(job.attemptsMade);
        // The first attempt hangs for good; the next one answers.
        if (job.attemptsMade === 0) return new Promise<never>(() => {});
        return { doubled: n * 2 };
      },
      { deadlineMs: 300 },
    );
    const worker = new Worker(declaration.queue, processor.process, { connection, prefix, concurrency: 1 });
    worker.on('error', () => {});
    const failures: string[] = [];
    worker.on('failed', (_job, error) => failures.push(error.message));
    const events = new QueueEvents(declaration.queue, { connection: createRedis(redisUrl, 'queue'), prefix });
    const queue = new Queue(declaration.queue, { connection, prefix });
    closers.push(
      () => worker.close(),
      () => events.close(),
      () => queue.close(),
    );
    await events.waitUntilReady();

    const job = await queue.add(declaration.name, { n: 21 }, declaration.options);
    const started = Date.now();
    expect(await job.waitUntilFinished(events, 10_000)).toEqual({ doubled: 42 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(calls).toEqual([0, 1]);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(/^hang job \S+ did not finish within 300 ms; it fails now and is retried/);
    const done = await queue.getJob(job.id!);
    // Two attempts: the one that ran out of time and the one that finished (BullMQ counts both).
    expect(done?.attemptsMade).toBe(2);
    expect(await done?.getState()).toBe('completed');
  });

  it('leaves a handler that finishes in time alone, and a handler without a deadline unbounded', async () => {
    const declaration: JobDeclaration<z.ZodObject<{ n: z.ZodNumber }>> = {
      queue: 'unused',
      name: 'quick',
      payload: z.object({ n: z.number() }),
      options: { attempts: 1, backoff: { type: 'fixed', delay: 10 } },
    };
    const job = { data: { n: 2 }, id: '1', attemptsMade: 0 } as never;
    const timed = processorFor(declaration, async ({ n }) => n + 1, { deadlineMs: 1_000 });
    expect(await timed.process(job)).toBe(3);
    expect('deadlineMs' in timed).toBe(false);
    const slow = processorFor(declaration, async ({ n }) => new Promise((resolve) => setTimeout(() => resolve(n), 50)));
    expect(await slow.process(job)).toBe(2);
  });
});
