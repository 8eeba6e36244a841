import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directoryIndexingJob, enqueueDirectoryJob } from '#core/directory';
import { createRedis } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import { directoryIndexingProcessor } from '#workers/queues/directory-indexing';
import { loadWorkerSettings } from '#workers/settings';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';

const prefix = uniqueId('dirq');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
let sql: Sql;
const connection = createRedis(redisUrl, 'queue');
let worker: Worker;
let events: QueueEvents;
let queue: Queue;
/** API ids whose re-index fails on its first attempt, as a database restart would make it. */
const failFirstAttemptOf = new Set<string>();

beforeAll(async () => {
  sql = createSql(testDatabaseUrl(), { max: 3 });
  const settings = loadWorkerSettings({ ...process.env, DATABASE_URL: testDatabaseUrl(), REDIS_PREFIX: prefix });
  const processor = directoryIndexingProcessor({ sql, redis: connection, settings, log: pino({ level: 'silent' }) });
  worker = new Worker(
    processor.job.queue,
    async (job) => {
      if (failFirstAttemptOf.has((job.data as { apiId?: string }).apiId ?? '') && job.attemptsMade === 0)
        throw new Error('connection terminated unexpectedly');
      return processor.process(job);
    },
    { connection, prefix, concurrency: 1 },
  );
  worker.on('error', () => {});
  events = new QueueEvents(directoryIndexingJob.queue, { connection: createRedis(redisUrl, 'queue'), prefix });
  await events.waitUntilReady();
  queue = new Queue(directoryIndexingJob.queue, { connection, prefix });
});
afterAll(async () => {
  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  await connection.quit();
  await sql.end();
});

describe('directory-indexing queue', () => {
  it('re-indexes one API as a job, reporting progress and log lines', async () => {
    await sql`update apis set description = 'stale' where id = 'xkcd.com'`;
    const jobId = await enqueueDirectoryJob(connection, prefix, { kind: 'reindex-api', apiId: 'xkcd.com' });
    const job = await Job.fromId(queue, jobId!);
    await job!.waitUntilFinished(events, 60_000);
    const done = await Job.fromId(queue, jobId!);
    expect(done?.returnvalue).toEqual({ reindexed: 'xkcd.com' });
    expect(done?.progress).toMatchObject({ processed: 1, updated: 1 });
    const [row] = await sql<{ description: string }[]>`select description from apis where id = 'xkcd.com'`;
    expect(row?.description).not.toBe('stale');
    const logs = await queue.getJobLogs(jobId!);
    expect(
      logs.logs.some((line) => line.includes('done:')),
      JSON.stringify(logs.logs),
    ).toBe(true);
  });

  it('fails a job for an API it cannot re-index, without retrying', async () => {
    const id = uniqueId('op-');
    await sql`insert into apis (id, name, provider, base_url, source) values (${id}, 'Operator', 'op.example', 'https://op.example', 'operator')`;
    const jobId = await enqueueDirectoryJob(connection, prefix, { kind: 'reindex-api', apiId: id });
    const job = await Job.fromId(queue, jobId!);
    await expect(job!.waitUntilFinished(events, 60_000)).rejects.toThrow(/not an imported API/);
    const failed = await Job.fromId(queue, jobId!);
    expect(failed?.attemptsMade).toBe(1);
    await sql`delete from apis where id = ${id}`;
  });

  it('retries a job that failed transiently, as its declaration says (the producer applies the declared attempts and backoff)', async () => {
    failFirstAttemptOf.add('xkcd.com');
    const jobId = (await enqueueDirectoryJob(connection, prefix, { kind: 'reindex-api', apiId: 'xkcd.com' }))!;
    const job = await Job.fromId(queue, jobId);
    expect(job?.opts.attempts).toBe(directoryIndexingJob.options.attempts);
    await job!.waitUntilFinished(events, 60_000);
    const done = await Job.fromId(queue, jobId);
    expect(done?.returnvalue).toEqual({ reindexed: 'xkcd.com' });
    expect(done?.attemptsMade).toBe(2);
    failFirstAttemptOf.delete('xkcd.com');
  });

  it('enqueues a full import once, however often it is asked', async () => {
    const first = await enqueueDirectoryJob(connection, prefix, { kind: 'import-all' });
    const second = await enqueueDirectoryJob(connection, prefix, { kind: 'import-all' });
    expect(second).toBe(first);
    const job = await Job.fromId(queue, first!);
    const result = (await job!.waitUntilFinished(events, 120_000)) as { processed: number; inserted: number; failed: number };
    // The suite's setup imported the catalog already: the job finds nothing new.
    expect(result).toMatchObject({ inserted: 0, failed: 0 });
    expect(result.processed).toBeGreaterThanOrEqual(2600);
  });
});
