import { UnrecoverableError } from 'bullmq';
import { mintEmailChangeLink, mintInviteLink, mintPasswordResetLink, mintVerificationLink } from '#core/identity';
import {
  accountDeletedMessage,
  accountEventMessage,
  emailChangeMessage,
  emailChangedMessage,
  emailVerifyMessage,
  connectRequestMessage,
  connectionRefreshFailedMessage,
  emailJob,
  humanStepMessage,
  loginAlertMessage,
  Mailer,
  memberInviteMessage,
  passwordResetMessage,
  topupFailedMessage,
  webhookDisabledMessage,
  type EmailPayload,
  type OutgoingMessage,
} from '#core/notifications';
import { findHumanStepAudience } from '#db/members';
import { findConnectRequestEmail } from '#db/connect-requests';
import { authSchemeSchema } from '#contracts/auth-scheme';
import { connectUrlFor } from '#core/connect-requests';
import { getAccount } from '#db/accounts';
import { getPerson } from '#db/people';
import { getAutoTopup } from '#db/auto-topup';
import { findWebhookEndpointById } from '#db/webhooks';
import { getOAuthConnection } from '#db/oauth';
import { reconnectLink } from '#core/oauth';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/** SMTP replies in the 5xx range are permanent: retrying the same message cannot succeed. */
const isPermanent = (error: unknown) =>
  typeof (error as { responseCode?: unknown }).responseCode === 'number' && (error as { responseCode: number }).responseCode >= 500;

/**
 * Outgoing e-mail. Each job names a message by reference; the processor builds it now (an
 * invitation mints its one-time link here, so the token never sits in Redis) and sends it over SMTP.
 * A message whose subject is gone (a member removed or already signed up) is skipped, not failed.
 */
export function emailProcessor({ sql, settings, log }: QueueDeps, mailer = new Mailer(settings)): QueueProcessor {
  const origin = new URL(settings.PUBLIC_URL).origin;

  async function build(payload: EmailPayload): Promise<OutgoingMessage[]> {
    switch (payload.kind) {
      case 'member-invite': {
        const invite = await mintInviteLink(sql, settings, payload.memberId);
        if (!invite) return [];
        return [memberInviteMessage({ to: invite.member.email, link: invite.link, expiresAt: invite.expiresAt })];
      }
      case 'login-alert': {
        const person = await getPerson(sql, payload.personId);
        if (!person) return [];
        return [
          loginAlertMessage({
            to: person.email,
            failingClients: payload.failingClients,
            windowSeconds: payload.windowSeconds,
            link: `${origin}/signin`,
          }),
        ];
      }
      case 'password-reset': {
        const reset = await mintPasswordResetLink(sql, settings, payload.personId);
        if (!reset) return [];
        return [passwordResetMessage({ to: reset.person.email, link: reset.link, expiresAt: reset.expiresAt })];
      }
      case 'email-verify': {
        const verify = await mintVerificationLink(sql, settings, payload.personId);
        if (!verify) return [];
        return [emailVerifyMessage({ to: verify.person.email, link: verify.link, expiresAt: verify.expiresAt })];
      }
      case 'email-change': {
        const change = await mintEmailChangeLink(sql, settings, payload.personId);
        if (!change) return [];
        return [emailChangeMessage({ to: change.to, link: change.link, expiresAt: change.expiresAt })];
      }
      case 'email-changed': {
        const person = await getPerson(sql, payload.personId);
        if (!person) return [];
        return [emailChangedMessage({ to: payload.previousEmail, newEmail: person.email, link: `${origin}/signin` })];
      }
      case 'account-deleted':
        return [accountDeletedMessage({ to: payload.to, forfeited: payload.forfeited })];
      case 'webhook-disabled': {
        const endpoint = await findWebhookEndpointById(sql, payload.endpointId);
        const owner = endpoint && (await getAccount(sql, endpoint.account_id));
        if (!endpoint || !owner || endpoint.status !== 'disabled') return [];
        return [
          webhookDisabledMessage({
            to: owner.email,
            url: endpoint.url,
            reason: endpoint.disabled_reason ?? 'deliveries failed',
            link: `${origin}/webhooks`,
          }),
        ];
      }
      case 'account-event': {
        const owner = await getAccount(sql, payload.accountId);
        if (!owner) return [];
        return [accountEventMessage({ to: owner.email, type: payload.type, data: payload.data, origin })];
      }
      case 'topup-failed': {
        const account = await getAutoTopup(sql, payload.accountId);
        if (!account) return [];
        return [topupFailedMessage({ to: account.email, reason: payload.reason, retryAfter: account.auto_topup_retry_after, link: `${origin}/` })];
      }
      case 'connect-request': {
        const request = await findConnectRequestEmail(sql, payload.requestId);
        // A request answered (or withdrawn) before the mail went out needs no announcement any more.
        if (!request || request.status !== 'pending') return [];
        const scheme = authSchemeSchema.safeParse(request.auth_scheme);
        const authKind = !scheme.success || scheme.data.type === 'none' ? 'none' : scheme.data.type === 'oauth2' ? 'oauth' : 'key';
        return [
          connectRequestMessage({
            to: request.owner_email,
            apiName: request.api_name,
            apiId: request.api_id,
            authKind,
            purpose: request.purpose,
            scopes: request.scopes,
            expiresAt: request.expires_at,
            link: connectUrlFor(settings.PUBLIC_URL, payload.requestId),
          }),
        ];
      }
      case 'connection-refresh-failed': {
        const connection = await getOAuthConnection(sql, payload.accountId, payload.connectionId);
        // Reconnected (or removed) before the mail went out: nothing to ask of anyone any more.
        if (!connection || connection.status !== 'needs_reauth') return [];
        const owner = await getAccount(sql, payload.accountId);
        if (!owner) return [];
        return [
          connectionRefreshFailedMessage({
            to: owner.email,
            provider: connection.provider,
            label: connection.label,
            reason: (connection.statusReason ?? 'The provider refused to renew the access').replace(/\.$/, ''),
            link: reconnectLink(settings.PUBLIC_URL, connection.id),
          }),
        ];
      }
      case 'human-step': {
        const audience = await findHumanStepAudience(sql, payload.sessionId, payload.stepId);
        if (!audience) return [];
        const waiting = payload.event === 'human_step.pending' || payload.event === 'human_step.reminder';
        // A step someone already took care of needs no announcement any more.
        if (waiting && audience.step_status !== 'pending') return [];
        // Waiting steps go to the owner and the approvers who may take them (the assignee, or all);
        // decisions go to the owner, who runs the agent.
        const people = waiting
          ? [audience.owner_email, ...(audience.assignee_email ? [audience.assignee_email] : audience.approver_emails)]
          : [audience.owner_email];
        const params = new URLSearchParams({ session: payload.sessionId, step: payload.stepId });
        const link = waiting ? `${origin}/inbox?${params}` : `${origin}/sessions/${encodeURIComponent(payload.sessionId)}`;
        return [...new Set(people)].map((to) =>
          humanStepMessage({
            to,
            event: payload.event,
            cookbookTitle: audience.cookbook_title,
            stepTitle: audience.step_title ?? payload.stepId,
            sessionId: payload.sessionId,
            link,
            note: waiting ? null : audience.note,
            decidedBy: waiting ? null : audience.completer_name,
          }),
        );
      }
    }
  }

  return processorFor(emailJob, async (payload, job) => {
    const messages = await build(payload);
    if (messages.length === 0) {
      await job.log(`skipped: nothing to send for ${payload.kind}`);
      return { sent: 0 };
    }
    // A retried job (the SMTP server failed half-way) does not send again to those already served.
    const done = new Set<number>(((job.progress as { sent?: number[] } | undefined)?.sent ?? []) as number[]);
    for (const [index, message] of messages.entries()) {
      if (done.has(index)) continue;
      try {
        await mailer.send(message);
      } catch (error) {
        if (isPermanent(error)) throw new UnrecoverableError(`the SMTP server refused the message: ${(error as Error).message}`);
        throw error;
      }
      done.add(index);
      await job.updateProgress({ sent: [...done] });
    }
    // Recipients' addresses are personal data: the log names the job and kind, not the people.
    log.info({ jobId: job.id, kind: payload.kind, messages: messages.length }, 'e-mail sent');
    return { sent: messages.length };
  });
}
