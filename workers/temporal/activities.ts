import type { Redis } from 'ioredis';
import type { Sql } from '../../db/src/sql.js';

/** What activities need from the outside world; injected by the worker (and by tests). */
export interface ActivityDeps {
  sql: Sql;
  redis: Redis;
  redisPrefix: string;
}

/**
 * Builds the activities with their dependencies (the factory pattern of Temporal's samples), so
 * workflows import only their types and tests can run them against real services.
 */
export function createActivities(_deps: ActivityDeps) {
  return {};
}

export type Activities = ReturnType<typeof createActivities>;
