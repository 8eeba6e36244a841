import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { addJob, type JobDeclaration, createQueue } from '#core/platform';

/**
 * What an e-mail job carries: which message to build, by reference only. Secrets (an invitation's
 * token) are minted by the worker when it sends, so they never sit in Redis or in the queue board.
 */
/** Session events a person is told about by e-mail (beside SSE). */
export const EMAILED_SESSION_EVENTS = ['human_step.pending', 'human_step.reminder', 'human_step.rejected', 'human_step.changes_requested'] as const;
export type EmailedSessionEvent = (typeof EMAILED_SESSION_EVENTS)[number];

const emailPayload = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('member-invite'), memberId: z.string().min(1).max(100) }),
  z.object({
    kind: z.literal('login-alert'),
    personId: z.string().min(1).max(100),
    /** Distinct clients (address blocks) that failed to sign in as this person within the window. */
    failingClients: z.number().int().min(1),
    windowSeconds: z.number().int().min(1),
  }),
  /** A person asked to reset their password: the worker mints the one-time link when it sends. */
  z.object({ kind: z.literal('password-reset'), personId: z.string().min(1).max(100) }),
  /** A new (or unverified) person's address: the worker mints the one-time verification link when it sends. */
  z.object({ kind: z.literal('email-verify'), personId: z.string().min(1).max(100) }),
  /** A person asked to change their address: the confirmation link goes to the new address, minted when sent. */
  z.object({ kind: z.literal('email-change'), personId: z.string().min(1).max(100) }),
  /**
   * A person's address changed: the address they had is told. It is in the job because the person's
   * row no longer holds it; the job is kept a day at most, like every job.
   */
  z.object({ kind: z.literal('email-changed'), personId: z.string().min(1).max(100), previousEmail: z.string().email().max(254) }),
  /** An account was deleted: its former address is told what happened (the rows hold it no more). */
  z.object({
    kind: z.literal('account-deleted'),
    to: z.string().email().max(254),
    /** Dollars written off, as a decimal string. */
    forfeited: z.string().max(40),
  }),
  z.object({ kind: z.literal('webhook-disabled'), endpointId: z.string().min(1).max(100) }),
  z.object({ kind: z.literal('topup-failed'), accountId: z.string().uuid(), reason: z.string().max(500) }),
  z.object({
    kind: z.literal('connection-refresh-failed'),
    accountId: z.string().uuid(),
    connectionId: z.string().uuid(),
    /** The connection.refresh_failed event's id: the job's id too, so one failure is mailed once. */
    eventId: z.string().min(1).max(200),
  }),
  z.object({
    kind: z.literal('account-event'),
    accountId: z.string().uuid(),
    /** The webhook event's id: the job's id too, so one event is mailed once. */
    eventId: z.string().min(1).max(200),
    type: z.string().min(1).max(100),
    data: z.record(z.string(), z.unknown()),
  }),
  /** An agent asked a person to connect an API: the owner is told what and why, with a one-step link. */
  z.object({ kind: z.literal('connect-request'), requestId: z.string().uuid() }),
  z.object({
    kind: z.literal('human-step'),
    sessionId: z.string().min(1).max(100),
    stepId: z.string().min(1).max(100),
    event: z.enum(EMAILED_SESSION_EVENTS),
    /** The event's number in the session's stream: with the session id, the job's id, so a retried activity adds it once. */
    seq: z.number().int().min(0),
  }),
]);
export type EmailPayload = z.output<typeof emailPayload>;

/**
 * Outgoing e-mail. An SMTP server that is down or refuses for a while is retried with backoff for
 * about an hour (8 attempts from 30 s, doubling); a permanent refusal fails the job, kept for review.
 */
export const emailJob: JobDeclaration<typeof emailPayload> = {
  queue: 'email',
  name: 'email',
  payload: emailPayload,
  // Kept a day after completion: a job id added again within that time (a retried activity) is a no-op.
  options: { attempts: 8, backoff: { type: 'exponential', delay: 30_000 }, removeOnComplete: { age: 86_400 }, removeOnFail: { age: 7 * 86_400 } },
};

export async function enqueueEmail(connection: Redis, prefix: string, payload: z.input<typeof emailPayload>): Promise<string | undefined> {
  const queue = createQueue(emailJob.queue, { connection, prefix });
  try {
    return await addEmail(queue, payload);
  } finally {
    await queue.close();
  }
}

/**
 * Adds an e-mail job to an open queue. A human-step message has a fixed id (session and event
 * number); news of a decision waits a few seconds, so the edge has recorded who decided.
 */
export function addEmail(queue: Queue, payload: z.input<typeof emailPayload>): Promise<string | undefined> {
  if (payload.kind === 'account-event') return addJob(queue, emailJob, payload, { jobId: `account-event-${payload.eventId}` });
  if (payload.kind === 'connect-request') return addJob(queue, emailJob, payload, { jobId: `connect-request-${payload.requestId}` });
  if (payload.kind === 'connection-refresh-failed')
    return addJob(queue, emailJob, payload, { jobId: `connection-refresh-failed-${payload.eventId}` });
  if (payload.kind !== 'human-step') return addJob(queue, emailJob, payload);
  const decision = payload.event === 'human_step.rejected' || payload.event === 'human_step.changes_requested';
  return addJob(queue, emailJob, payload, { jobId: `human-step-${payload.sessionId}-${payload.seq}`, ...(decision ? { delay: 3_000 } : {}) });
}
