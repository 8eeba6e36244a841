import { UnrecoverableError } from 'bullmq';
import { mintInviteLink } from '#core/identity';
import { emailJob, Mailer, memberInviteMessage, type EmailPayload } from '#core/notifications';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/** SMTP replies in the 5xx range are permanent: retrying the same message cannot succeed. */
const isPermanent = (error: unknown) => typeof (error as { responseCode?: unknown }).responseCode === 'number' && (error as { responseCode: number }).responseCode >= 500;

/**
 * Outgoing e-mail. Each job names a message by reference; the processor builds it now (an
 * invitation mints its one-time link here, so the token never sits in Redis) and sends it over SMTP.
 * A message whose subject is gone (a member removed or already signed up) is skipped, not failed.
 */
export function emailProcessor({ sql, settings, log }: QueueDeps, mailer = new Mailer(settings)): QueueProcessor {
  async function build(payload: EmailPayload) {
    switch (payload.kind) {
      case 'member-invite': {
        const invite = await mintInviteLink(sql, settings, payload.memberId);
        if (!invite) return null;
        return memberInviteMessage({ to: invite.member.email, invitedBy: invite.invitedBy, link: invite.link, expiresAt: invite.expiresAt });
      }
    }
  }

  return processorFor(emailJob, async (payload, job) => {
    const message = await build(payload);
    if (!message) {
      await job.log(`skipped: nothing to send for ${payload.kind}`);
      return { sent: false };
    }
    try {
      const messageId = await mailer.send(message);
      // The recipient's address is personal data: the log names the job and kind, not the person.
      log.info({ jobId: job.id, kind: payload.kind }, 'e-mail sent');
      return { sent: true, messageId };
    } catch (error) {
      if (isPermanent(error)) throw new UnrecoverableError(`the SMTP server refused the message: ${(error as Error).message}`);
      throw error;
    }
  });
}
