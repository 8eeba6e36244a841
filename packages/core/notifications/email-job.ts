import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { addJob, type JobDeclaration } from '#core/platform';

/**
 * What an e-mail job carries: which message to build, by reference only. Secrets (an invitation's
 * token) are minted by the worker when it sends, so they never sit in Redis or in the queue board.
 */
const emailPayload = z.discriminatedUnion('kind', [z.object({ kind: z.literal('member-invite'), memberId: z.string().min(1).max(100) })]);
export type EmailPayload = z.output<typeof emailPayload>;

/**
 * Outgoing e-mail. An SMTP server that is down or refuses for a while is retried with backoff for
 * about an hour (8 attempts from 30 s, doubling); a permanent refusal fails the job, kept for review.
 */
export const emailJob: JobDeclaration<typeof emailPayload> = {
  queue: 'email',
  name: 'email',
  payload: emailPayload,
  options: { attempts: 8, backoff: { type: 'exponential', delay: 30_000 }, removeOnComplete: { count: 200 }, removeOnFail: { count: 500 } },
};

export async function enqueueEmail(connection: Redis, prefix: string, payload: z.input<typeof emailPayload>): Promise<string | undefined> {
  const queue = new Queue(emailJob.queue, { connection, prefix });
  try {
    return await addJob(queue, emailJob, payload);
  } finally {
    await queue.close();
  }
}
