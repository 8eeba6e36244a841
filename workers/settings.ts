import { z } from 'zod';
import { directorySettings } from '../db/src/directory-settings.js';
import { parseSettings, sharedSettings } from '../db/src/settings.js';

/** Settings of the worker processes (Temporal worker and BullMQ workers). */
export const workerSettings = sharedSettings.extend(directorySettings.shape).extend({
  /** Jobs processed at once by each BullMQ worker. */
  QUEUE_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  /** Seconds a worker waits for jobs and activities in flight when asked to stop. */
  SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(1).max(600).default(20),
});

export type WorkerSettings = z.output<typeof workerSettings>;

export const loadWorkerSettings = (env: NodeJS.ProcessEnv = process.env) => parseSettings(workerSettings, env);
