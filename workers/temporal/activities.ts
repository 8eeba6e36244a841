import { ApplicationFailure } from '@temporalio/activity';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { addEmail, EMAILED_SESSION_EVENTS, emailJob, type EmailedSessionEvent } from '#core/notifications';
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
  let emails: Queue | null = null;
  /** Human-step news also goes out by e-mail (the e-mail queue's worker builds and sends it). */
  async function emailAbout(sessionId: string, events: SessionChange['events']): Promise<void> {
    for (const event of events) {
      if (!(EMAILED_SESSION_EVENTS as readonly string[]).includes(event.name)) continue;
      const stepId = event.data.stepId;
      if (typeof stepId !== 'string') continue;
      emails ??= new Queue(emailJob.queue, { connection: deps.redis, prefix: deps.redisPrefix });
      await addEmail(emails, { kind: 'human-step', sessionId, stepId, event: event.name as EmailedSessionEvent, seq: event.seq });
    }
  }
  return {
    /**
     * Records one cookbook-session transition: the Postgres mirror (session row and step history)
     * first, then the events on the session's Redis stream, then e-mail jobs for human-step news.
     * All three are idempotent, so a retry or a restarted worker repeats nothing and loses nothing.
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
      // After the events: a retry adds each e-mail job once (its id is the session and event number).
      await emailAbout(change.input.sessionId, change.events);
    },
  };
}

