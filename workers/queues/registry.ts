import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '#db/sql';
import type { WorkerSettings } from '../settings.js';
import type { QueueDefinition } from './definitions.js';
import { directoryIndexingQueue } from './directory-indexing.js';
import { usageQueue } from './usage.js';

export interface QueueDeps {
  sql: Sql;
  redis: Redis;
  settings: WorkerSettings;
  log: Logger;
}

/** Every queue the worker process serves. Usage aggregation and directory indexing register here. */
export function queueDefinitions(deps: QueueDeps): QueueDefinition[] {
  return [usageQueue(deps) as unknown as QueueDefinition, directoryIndexingQueue(deps) as unknown as QueueDefinition];
}
