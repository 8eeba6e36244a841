import type { EmailedSessionEvent } from './email-job.js';
import type { OutgoingMessage } from './mailer.js';

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

/** The invitation an approver receives: who invited them, what they may do, the one-time link. */
export function memberInviteMessage(input: { to: string; invitedBy: string; link: string; expiresAt: Date }): OutgoingMessage {
  const expires = input.expiresAt.toUTCString();
  const subject = `${input.invitedBy} invited you to approve steps on Service`;
  const text = [
    `${input.invitedBy} invited you to approve the human steps of their cookbook sessions on Service.`,
    '',
    'As an approver you see the steps that wait for a person, with what the agent prepared, and approve,',
    'reject or send them back with a note. You do not see keys, funds or usage.',
    '',
    `Choose a password and sign in: ${input.link}`,
    '',
    `The link works once, until ${expires}. If you did not expect this, ignore this message.`,
  ].join('\n');
  const html = `<p>${escapeHtml(input.invitedBy)} invited you to approve the human steps of their cookbook sessions on Service.</p>
<p>As an approver you see the steps that wait for a person, with what the agent prepared, and approve, reject or send them back with a note. You do not see keys, funds or usage.</p>
<p><a href="${escapeHtml(input.link)}">Choose a password and sign in</a></p>
<p>The link works once, until ${escapeHtml(expires)}. If you did not expect this, ignore this message.</p>`;
  return { to: input.to, subject, text, html };
}

/**
 * A human step's news: it waits (or still waits) for a person, or a person rejected it or sent it
 * back. The message names the step and links straight to it in the dashboard's inbox; what the agent
 * prepared stays behind the sign-in, not in the mail.
 */
export function humanStepMessage(input: {
  to: string;
  event: EmailedSessionEvent;
  cookbookTitle: string;
  stepTitle: string;
  sessionId: string;
  link: string;
  note: string | null;
  decidedBy: string | null;
}): OutgoingMessage {
  const about = `"${input.stepTitle}" in ${input.cookbookTitle} (session ${input.sessionId})`;
  const [subject, lead, action] = ((): [string, string, string] => {
    switch (input.event) {
      case 'human_step.pending':
        return [`Waiting for you: ${input.stepTitle} (${input.cookbookTitle})`, `A cookbook session waits for a person: ${about}.`, 'Review it and decide'];
      case 'human_step.reminder':
        return [`Reminder, still waiting: ${input.stepTitle} (${input.cookbookTitle})`, `A cookbook session is still waiting for a person: ${about}.`, 'Review it and decide'];
      case 'human_step.rejected':
        return [`Rejected: ${input.stepTitle} (${input.cookbookTitle})`, `${input.decidedBy ?? 'A person'} rejected ${about}. The session ended without its remaining steps.`, 'See the session'];
      case 'human_step.changes_requested':
        return [`Changes requested: ${input.stepTitle} (${input.cookbookTitle})`, `${input.decidedBy ?? 'A person'} sent ${about} back to the agent.`, 'See the session'];
    }
  })();
  const noteLines = input.note ? ['', `Their note: ${input.note}`] : [];
  const text = [lead, ...noteLines, '', `${action}: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>${input.note ? `<blockquote>${escapeHtml(input.note)}</blockquote>` : ''}
<p><a href="${escapeHtml(input.link)}">${escapeHtml(action)}</a></p>`;
  return { to: input.to, subject, text, html };
}

/** Tells an account that one of its webhook endpoints was disabled after failing deliveries. */
export function webhookDisabledMessage(input: { to: string; url: string; reason: string; link: string }): OutgoingMessage {
  const subject = 'A webhook endpoint was disabled';
  const lead = `Deliveries to your webhook endpoint ${input.url} kept failing, so it was disabled and receives no more events.`;
  const text = [lead, '', `Last failure: ${input.reason}`, '', `Fix the endpoint, then enable it again (events from while it was disabled are not resent; retry them from the delivery log): ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>Last failure: ${escapeHtml(input.reason)}</p>
<p><a href="${escapeHtml(input.link)}">Fix the endpoint, then enable it again</a> (events from while it was disabled are not resent; retry them from the delivery log).</p>`;
  return { to: input.to, subject, text, html };
}

/** Tells an account that an automatic top-up did not go through. */
export function topupFailedMessage(input: { to: string; reason: string; retryAfter: Date | null; link: string }): OutgoingMessage {
  const subject = 'Your automatic top-up did not go through';
  const next = input.retryAfter ? `It will be tried again after ${input.retryAfter.toUTCString()}.` : 'It will be tried again when the balance is next below your threshold.';
  const lead = `We tried to add funds to your balance with your saved card, and the payment failed: ${input.reason}.`;
  const text = [lead, next, '', `Check the card or add funds now: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(next)}</p><p><a href="${escapeHtml(input.link)}">Check the card or add funds now</a></p>`;
  return { to: input.to, subject, text, html };
}
