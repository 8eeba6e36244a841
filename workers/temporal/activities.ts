import { ApplicationFailure } from '@temporalio/activity';
import type { Redis } from 'ioredis';
import { applySessionChange } from '#db/cookbook-sessions';
import { appendSessionEvents } from '#core/cookbooks';
import type { Sql } from '#db/sql';
import { workflowIdFor, type SessionActivities, type SessionChange } from '#workflows/messages';

/** What activities need from the outside world; injected by the worker (and by tests). */
export interface ActivityDeps {
  sql: Sql;
  redis: Redis;
  redisPrefix: string;
}

const FOREIGN_KEY_VIOLATION = '23503';

/**
 * Builds the activities with their dependencies (the factory pattern of Temporal's samples), so
 * workflows import only their types and tests can run them against real services.
 */
export function createActivities(deps: ActivityDeps): SessionActivities {
  return {
    /**
     * Records one cookbook-session transition: the Postgres mirror (session row and step history)
     * first, then the events on the session's Redis stream. Both halves are idempotent, so a retry
     * or a restarted worker repeats nothing and loses nothing.
     */
    async recordSessionChange(change: SessionChange): Promise<void> {
      if (!change.eventsOnly) {
        try {
          await applySessionChange(deps.sql, change, workflowIdFor(change.input.sessionId));
        } catch (error) {
          if ((error as { code?: string }).code === FOREIGN_KEY_VIOLATION) {
            throw ApplicationFailure.create({
              type: 'SessionOrphaned',
              message: `Session ${change.input.sessionId} can no longer be recorded: its account or cookbook was deleted`,
              nonRetryable: true,
            });
          }
          throw error;
        }
      }
      await appendSessionEvents(deps.redis, deps.redisPrefix, change.input.sessionId, change.events);
    },
  };
}

