import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/** The BullMQ queue of directory indexing: a full import, or re-indexing one API. */
export const DIRECTORY_QUEUE = 'directory-indexing';

export const directoryJobPayload = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('import-all'), force: z.boolean().default(false) }),
  z.object({ kind: z.literal('reindex-api'), apiId: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,199}$/) }),
]);
export type DirectoryJob = z.output<typeof directoryJobPayload>;

/**
 * Enqueues a directory job. A full import has a fixed job id, so asking twice while one is waiting
 * or running adds nothing.
 */
export async function enqueueDirectoryJob(connection: Redis, prefix: string, job: z.input<typeof directoryJobPayload>): Promise<string | undefined> {
  const queue = new Queue(DIRECTORY_QUEUE, { connection, prefix });
  try {
    const payload = directoryJobPayload.parse(job);
    const jobId = payload.kind === 'import-all' ? 'import-all' : `reindex-${payload.apiId}-${Date.now()}`;
    const added = await queue.add(payload.kind, payload, { jobId, removeOnComplete: { count: 20 }, removeOnFail: { count: 50 } });
    return added.id;
  } finally {
    await queue.close();
  }
}
