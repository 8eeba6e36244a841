import type { Redis } from 'ioredis';
import { z } from 'zod';
import { apiId } from '#contracts/directory';
import { addJob, type JobDeclaration, createQueue } from '#core/platform';

const directoryJobPayload = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('import-all'), force: z.boolean().default(false) }),
  z.object({ kind: z.literal('reindex-api'), apiId }),
]);
export type DirectoryJob = z.output<typeof directoryJobPayload>;

/**
 * Directory indexing: a full import of the APIs.guru catalog, or re-indexing one API. A transient
 * failure (the database restarting mid-import) is retried; the import is idempotent, so a retry
 * only finishes what the failed attempt left.
 */
export const directoryIndexingJob: JobDeclaration<typeof directoryJobPayload> = {
  queue: 'directory-indexing',
  name: 'directory-indexing',
  payload: directoryJobPayload,
  options: { attempts: 3, backoff: { type: 'exponential', delay: 5_000 }, removeOnComplete: { count: 20 }, removeOnFail: { count: 50 } },
};

/**
 * Enqueues a directory job. A full import has a fixed job id, so asking twice while one is waiting
 * or running adds nothing.
 */
export async function enqueueDirectoryJob(connection: Redis, prefix: string, job: z.input<typeof directoryJobPayload>): Promise<string | undefined> {
  const queue = createQueue(directoryIndexingJob.queue, { connection, prefix });
  try {
    const jobId = job.kind === 'import-all' ? 'import-all' : `reindex-${job.apiId}-${Date.now()}`;
    return await addJob(queue, directoryIndexingJob, job, { jobId });
  } finally {
    await queue.close();
  }
}
