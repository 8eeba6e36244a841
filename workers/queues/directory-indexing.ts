import { UnrecoverableError, type Job } from 'bullmq';
import { importDirectory, loadCuration, reindexApi, type ImportOptions } from '#core/directory';
import { directoryJobPayload, DIRECTORY_QUEUE } from '#core/directory';
import { parseDollars } from '#contracts/money';
import type { QueueDefinition } from './definitions.js';
import type { QueueDeps } from './registry.js';

/**
 * Directory indexing: imports the APIs.guru directory (streamed, idempotent, with progress on the
 * job and in the log) or re-indexes one API. One job at a time: imports are I/O on one table.
 */
export function directoryIndexingQueue({ sql, settings, log }: QueueDeps): QueueDefinition<typeof directoryJobPayload> {
  return {
    queue: DIRECTORY_QUEUE,
    payload: directoryJobPayload,
    attempts: 3,
    backoff: { type: 'exponential', delay: 5_000 },
    concurrency: 1,
    process: async (job: Job) => {
      const parsed = directoryJobPayload.safeParse(job.data);
      if (!parsed.success) throw new UnrecoverableError(`invalid directory job: ${parsed.error.message}`);
      const options: ImportOptions = {
        defaultPriceMicros: parseDollars(settings.DIRECTORY_DEFAULT_PRICE) ?? 1000n,
        curation: await loadCuration(settings.DIRECTORY_CURATION_FILE),
        connectionsMasterKey: settings.CONNECTIONS_MASTER_KEY,
        progressEvery: 100,
        log: (line) => {
          log.info({ queue: DIRECTORY_QUEUE, jobId: job.id }, line);
          void job.log(line);
        },
        onProgress: async (progress) => {
          await job.updateProgress(progress);
        },
      };
      if (parsed.data.kind === 'reindex-api') {
        const done = await reindexApi(sql, parsed.data.apiId, options);
        if (!done) throw new UnrecoverableError(`${parsed.data.apiId} is not an imported API`);
        return { reindexed: parsed.data.apiId };
      }
      return importDirectory(sql, { ...options, force: parsed.data.force });
    },
  };
}
