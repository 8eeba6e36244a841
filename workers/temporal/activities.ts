import { ApplicationFailure } from '@temporalio/activity';
import { ZodError } from 'zod';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  addEmail,
  EMAILED_SESSION_EVENTS,
  emailJob,
  WebhookEmitter,
  webhookSettings,
  type EmailedSessionEvent,
  type WebhookEventType,
  type WebhookSettings,
} from '#core/notifications';
import { applySessionChange } from '#db/cookbook-sessions';
import { appendSessionEvents } from '#core/cookbooks';
import type { Sql } from '#db/sql';
import { ACTIVITY_FAILURES, workflowIdFor, type SessionActivities, type SessionChange } from '#workflows/messages';
import { createQueue } from '#core/platform';

/** What activities need from the outside world; injected by the worker (and by tests). */
export interface ActivityDeps {
  sql: Sql;
  redis: Redis;
  redisPrefix: string;
  /** Webhook retry settings (the worker's); defaults otherwise. */
  webhooks?: Pick<WebhookSettings, 'WEBHOOK_ATTEMPTS' | 'WEBHOOK_RETRY_BASE_MS'>;
}

/** Session events that are also webhook events of the session's account. */
const WEBHOOK_SESSION_EVENTS: readonly string[] = [
  'human_step.pending',
  'human_step.reminder',
  'human_step.rejected',
  'human_step.changes_requested',
  'session.completed',
  'session.failed',
  'session.expired',
] satisfies WebhookEventType[];

const FOREIGN_KEY_VIOLATION = '23503';

/**
 * The failure a retry cannot fix, or null when a retry may help (Postgres or Redis away, a
 * serialization failure, a timeout). Postgres data exceptions (SQLSTATE class 22: an untranslatable
 * character such as \u0000 or a lone surrogate in jsonb, a bad text representation) and integrity
 * violations (class 23) refuse the same data every time; so does a schema check. The message names
 * the SQLSTATE and Postgres' own words, never the data: it becomes a session event.
 */
export function nonRetryableFailure(error: unknown, sessionId: string): ApplicationFailure | null {
  if (error instanceof ApplicationFailure) return error.nonRetryable ? error : null;
  if (error instanceof ZodError) {
    return ApplicationFailure.create({
      type: ACTIVITY_FAILURES.unrecordable,
      message: `Session ${sessionId}: a transition broke its schema (${error.issues[0]?.path.join('.') ?? ''}: ${error.issues[0]?.message ?? 'invalid'})`,
      nonRetryable: true,
    });
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^2[23][0-9A-Z]{3}$/.test(code)) return null;
  if (code === FOREIGN_KEY_VIOLATION) {
    return ApplicationFailure.create({
      type: ACTIVITY_FAILURES.orphaned,
      message: `Session ${sessionId} can no longer be recorded: its account or cookbook was deleted`,
      nonRetryable: true,
    });
  }
  return ApplicationFailure.create({
    type: ACTIVITY_FAILURES.unrecordable,
    message: `Session ${sessionId}: the database refused the step's data (SQLSTATE ${code}: ${(error as Error).message})`,
    nonRetryable: true,
  });
}

/**
 * Builds the activities with their dependencies (the factory pattern of Temporal's samples), so
 * workflows import only their types and tests can run them against real services.
 */
export function createActivities(deps: ActivityDeps): SessionActivities {
  let emails: Queue | null = null;
  let webhooks: WebhookEmitter | null = null;
  /** Session events the account's webhook endpoints listen to; the event id is the session and event number, so a retry adds nothing. */
  async function webhooksAbout(accountId: string, sessionId: string, events: SessionChange['events']): Promise<void> {
    for (const event of events) {
      if (!WEBHOOK_SESSION_EVENTS.includes(event.name)) continue;
      webhooks ??= new WebhookEmitter(deps.sql, deps.redis, deps.redisPrefix, deps.webhooks ?? webhookSettings.parse({}));
      await webhooks.emit(accountId, event.name as WebhookEventType, { sessionId, ...event.data }, `msg_${sessionId}_${event.seq}`);
    }
  }
  /** Human-step news also goes out by e-mail (the e-mail queue's worker builds and sends it). */
  async function emailAbout(sessionId: string, events: SessionChange['events']): Promise<void> {
    for (const event of events) {
      if (!(EMAILED_SESSION_EVENTS as readonly string[]).includes(event.name)) continue;
      const stepId = event.data.stepId;
      if (typeof stepId !== 'string') continue;
      emails ??= createQueue(emailJob.queue, { connection: deps.redis, prefix: deps.redisPrefix });
      await addEmail(emails, { kind: 'human-step', sessionId, stepId, event: event.name as EmailedSessionEvent, seq: event.seq });
    }
  }
  return {
    /**
     * Records one cookbook-session transition: the Postgres mirror (session row and step history)
     * first, then the events on the session's Redis stream, then e-mail jobs for human-step news and the account's webhook events.
     * All three are idempotent, so a retry or a restarted worker repeats nothing and loses nothing.
     */
    async recordSessionChange(change: SessionChange): Promise<void> {
      try {
        if (!change.eventsOnly) await applySessionChange(deps.sql, change, workflowIdFor(change.input.sessionId));
        await appendSessionEvents(deps.redis, deps.redisPrefix, change.input.sessionId, change.events);
        // After the events: a retry adds each e-mail job once (its id is the session and event number).
        await emailAbout(change.input.sessionId, change.events);
        if (!change.eventsOnly) await webhooksAbout(change.input.accountId, change.input.sessionId, change.events);
      } catch (error) {
        throw nonRetryableFailure(error, change.input.sessionId) ?? error;
      }
    },
  };
}
