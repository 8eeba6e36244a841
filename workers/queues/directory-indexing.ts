import { UnrecoverableError } from 'bullmq';
import { directoryIndexingJob, importDirectory, loadCuration, modelDirSetting, reindexApi, type ImportOptions } from '#core/directory';
import { parseDollars } from '#contracts/money';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/**
 * Directory indexing: imports the APIs.guru directory (streamed, idempotent, with progress on the
 * job and in the log) or re-indexes one API. One job at a time: imports are I/O on one table.
 */
export function directoryIndexingProcessor({ sql, settings, log }: QueueDeps): QueueProcessor {
  const queue = directoryIndexingJob.queue;
  return processorFor(
    directoryIndexingJob,
    async (payload, job) => {
      const options: ImportOptions = {
        defaultPriceMicros: parseDollars(settings.DIRECTORY_DEFAULT_PRICE) ?? 1000n,
        curation: await loadCuration(settings.DIRECTORY_CURATION_FILE),
        connectionsMasterKey: settings.CONNECTIONS_MASTER_KEY,
        progressEvery: 100,
        modelDir: modelDirSetting(settings.DISCOVERY_MODEL_DIR),
        log: (line) => {
          log.info({ queue, jobId: job.id }, line);
          void job.log(line);
        },
        onProgress: async (progress) => {
          await job.updateProgress(progress);
        },
      };
      if (payload.kind === 'reindex-api') {
        const done = await reindexApi(sql, payload.apiId, options);
        if (!done) throw new UnrecoverableError(`${payload.apiId} is not an imported API`);
        return { reindexed: payload.apiId };
      }
      return importDirectory(sql, { ...options, force: payload.force });
    },
    { concurrency: 1 },
  );
}
