import type { EmailedSessionEvent } from './email-job.js';
import type { OutgoingMessage } from './mailer.js';

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

/**
 * The invitation an approver receives: what they may do and the one-time link. It names no sender:
 * the inviting account's address was never verified, so printing it would let anyone send mail that
 * looks as if it came from someone else. The person sees the account once they have signed in.
 */
export function memberInviteMessage(input: { to: string; link: string; expiresAt: Date }): OutgoingMessage {
  const expires = input.expiresAt.toUTCString();
  const subject = 'You are invited to approve steps on Service';
  const lead = 'An account owner on Service invited this address to approve the human steps of their cookbook sessions.';
  const text = [
    lead,
    '',
    'As an approver you see the steps that wait for a person, with what the agent prepared, and approve,',
    'reject or send them back with a note. You do not see keys, funds or usage.',
    '',
    `Accept and sign in: ${input.link}`,
    'New to Service? You choose a password there. Already signing in with this address? Use your password;',
    'the account is added to your login and you switch between your accounts in the dashboard.',
    '',
    `The link works once, until ${expires}. If you did not expect this, ignore this message: nothing happens.`,
  ].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>
<p>As an approver you see the steps that wait for a person, with what the agent prepared, and approve, reject or send them back with a note. You do not see keys, funds or usage.</p>
<p><a href="${escapeHtml(input.link)}">Accept and sign in</a></p>
<p>New to Service? You choose a password there. Already signing in with this address? Use your password; the account is added to your login and you switch between your accounts in the dashboard.</p>
<p>The link works once, until ${escapeHtml(expires)}. If you did not expect this, ignore this message: nothing happens.</p>`;
  return { to: input.to, subject, text, html };
}

/** Tells a person that many clients failed to sign in as them: someone may be guessing their password. */
export function loginAlertMessage(input: { to: string; failingClients: number; windowSeconds: number; link: string }): OutgoingMessage {
  const minutes = Math.round(input.windowSeconds / 60);
  const subject = 'Failed sign-ins to your Service login';
  const lead = `In the last ${minutes} minutes, sign-ins with your address and a wrong password came from about ${input.failingClients} different networks. Someone may be guessing your password.`;
  const calm = 'Your login is not locked: you can still sign in with your password, and each guessing network is slowed down.';
  const advice = 'If this was not you, choose a long password you use nowhere else. No action is needed if it was you.';
  const text = [lead, '', calm, advice, '', `Sign in: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(calm)}</p><p>${escapeHtml(advice)}</p><p><a href="${escapeHtml(input.link)}">Sign in</a></p>`;
  return { to: input.to, subject, text, html };
}

/**
 * A password reset link. Says plainly that nothing changes if the person did not ask, and that using
 * the link signs them out everywhere.
 */
export function passwordResetMessage(input: { to: string; link: string; expiresAt: Date }): OutgoingMessage {
  const expires = input.expiresAt.toUTCString();
  const subject = 'Choose a new password for Service';
  const lead = 'Someone (we hope you) asked to choose a new password for the Service login of this address.';
  const effect = 'Setting a new password signs you out of the dashboard everywhere; your API keys keep working.';
  const ignore = 'If you did not ask for this, ignore this message: your password stays as it is.';
  const text = [lead, '', `Choose a new password: ${input.link}`, '', effect, `The link works once, until ${expires}.`, ignore].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>
<p><a href="${escapeHtml(input.link)}">Choose a new password</a></p>
<p>${escapeHtml(effect)} The link works once, until ${escapeHtml(expires)}.</p>
<p>${escapeHtml(ignore)}</p>`;
  return { to: input.to, subject, text, html };
}

/**
 * The sign-up's verification link: what verifying unlocks, and that nothing happens if the person did
 * not sign up.
 */
export function emailVerifyMessage(input: { to: string; link: string; expiresAt: Date }): OutgoingMessage {
  const expires = input.expiresAt.toUTCString();
  const subject = 'Verify your e-mail address for Service';
  const lead = 'Someone (we hope you) signed up to Service with this address. Please confirm that it is yours.';
  const unlocks = 'Until it is verified the account can use everything free and spend its sign-up credit, but cannot add funds or invite approvers.';
  const ignore = 'If you did not sign up, ignore this message: the address stays unverified and you hear nothing more unless someone asks again.';
  const text = [lead, '', `Verify the address: ${input.link}`, '', unlocks, `The link works once, until ${expires}.`, ignore].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>
<p><a href="${escapeHtml(input.link)}">Verify the address</a></p>
<p>${escapeHtml(unlocks)} The link works once, until ${escapeHtml(expires)}.</p>
<p>${escapeHtml(ignore)}</p>`;
  return { to: input.to, subject, text, html };
}

/** Sent to the new address of an address change: the change happens only when this link is opened. */
export function emailChangeMessage(input: { to: string; link: string; expiresAt: Date }): OutgoingMessage {
  const expires = input.expiresAt.toUTCString();
  const subject = 'Confirm your new e-mail address for Service';
  const lead = 'A person signed in to Service asked to use this address from now on.';
  const effect = 'Once you confirm, you sign in with this address and the account e-mails come here; the old address is told.';
  const ignore = 'If you did not ask for this, ignore this message: nothing changes.';
  const text = [lead, '', `Confirm the new address: ${input.link}`, '', effect, `The link works once, until ${expires}.`, ignore].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>
<p><a href="${escapeHtml(input.link)}">Confirm the new address</a></p>
<p>${escapeHtml(effect)} The link works once, until ${escapeHtml(expires)}.</p>
<p>${escapeHtml(ignore)}</p>`;
  return { to: input.to, subject, text, html };
}

/** Tells the former address that the login moved to another one, and what to do if that was not them. */
export function emailChangedMessage(input: { to: string; newEmail: string; link: string }): OutgoingMessage {
  const subject = 'Your Service sign-in address was changed';
  const lead = `The Service login of this address now signs in with ${input.newEmail}. This address gets no more account e-mail.`;
  const advice = `If you did not do this, someone knows your password: use "Forgot password?" with the new address if you can reach it, or contact the operator of this Service at once.`;
  const text = [lead, '', advice, '', `Sign in: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(advice)}</p><p><a href="${escapeHtml(input.link)}">Sign in</a></p>`;
  return { to: input.to, subject, text, html };
}

/** Confirms to the former address that the account and its login are gone, and what became of the money. */
export function accountDeletedMessage(input: { to: string; forfeited: string }): OutgoingMessage {
  const subject = 'Your Service account was deleted';
  const lead = 'Your Service account and its login were deleted, as you asked. Its keys no longer work and nobody can sign in with this address.';
  const money =
    input.forfeited === '0.00' ? 'No balance was left on it.' : `The $${input.forfeited} left on the balance was given up, as you confirmed.`;
  const kept =
    'The ledger of its payments and charges is kept, under the account number only, for as long as the law requires; everything else that named you is erased.';
  const text = [lead, '', money, kept].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(money)}</p><p>${escapeHtml(kept)}</p>`;
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
        return [
          `Waiting for you: ${input.stepTitle} (${input.cookbookTitle})`,
          `A cookbook session waits for a person: ${about}.`,
          'Review it and decide',
        ];
      case 'human_step.reminder':
        return [
          `Reminder, still waiting: ${input.stepTitle} (${input.cookbookTitle})`,
          `A cookbook session is still waiting for a person: ${about}.`,
          'Review it and decide',
        ];
      case 'human_step.rejected':
        return [
          `Rejected: ${input.stepTitle} (${input.cookbookTitle})`,
          `${input.decidedBy ?? 'A person'} rejected ${about}. The session ended without its remaining steps.`,
          'See the session',
        ];
      case 'human_step.changes_requested':
        return [
          `Changes requested: ${input.stepTitle} (${input.cookbookTitle})`,
          `${input.decidedBy ?? 'A person'} sent ${about} back to the agent.`,
          'See the session',
        ];
    }
  })();
  const noteLines = input.note ? ['', `Their note: ${input.note}`] : [];
  const text = [lead, ...noteLines, '', `${action}: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>${input.note ? `<blockquote>${escapeHtml(input.note)}</blockquote>` : ''}
<p><a href="${escapeHtml(input.link)}">${escapeHtml(action)}</a></p>`;
  return { to: input.to, subject, text, html };
}

/**
 * An agent asks a person to connect an API: which API, how it is connected, what the agent wants to
 * do and why (its own words, quoted as plain text), and the one-step link into the dashboard's inbox.
 */
export function connectRequestMessage(input: {
  to: string;
  apiName: string;
  apiId: string;
  authKind: 'key' | 'oauth' | 'none';
  purpose: string;
  scopes: string[];
  expiresAt: Date;
  link: string;
}): OutgoingMessage {
  const subject = `An agent asks you to connect ${input.apiName}`;
  const lead = `An agent using your Service account asks you to connect ${input.apiName} (${input.apiId}) so that it can call it.`;
  const how =
    input.authKind === 'oauth'
      ? `You connect it by signing in to the provider and granting access${input.scopes.length > 0 ? ` (scopes asked for: ${input.scopes.join(', ')})` : ''}.`
      : 'You connect it by pasting your own key for this API; it is stored encrypted and never shown to the agent.';
  const until = `If nobody answers, the request expires on ${input.expiresAt.toUTCString()}. You can also decline it.`;
  const text = [
    lead,
    '',
    'What the agent says it wants to do and why:',
    '',
    ...input.purpose.split('\n').map((line) => `> ${line}`),
    '',
    how,
    until,
    '',
    `Connect or decline: ${input.link}`,
  ].join('\n');
  const html = `<p>${escapeHtml(lead)}</p>
<p>What the agent says it wants to do and why:</p>
<blockquote style="white-space: pre-wrap">${escapeHtml(input.purpose)}</blockquote>
<p>${escapeHtml(how)} ${escapeHtml(until)}</p>
<p><a href="${escapeHtml(input.link)}">Connect or decline</a></p>`;
  return { to: input.to, subject, text, html };
}

/** Tells an account that one of its webhook endpoints was disabled after failing deliveries. */
export function webhookDisabledMessage(input: { to: string; url: string; reason: string; link: string }): OutgoingMessage {
  const subject = 'A webhook endpoint was disabled';
  const lead = `Deliveries to your webhook endpoint ${input.url} kept failing, so it was disabled and receives no more events.`;
  const text = [
    lead,
    '',
    `Last failure: ${input.reason}`,
    '',
    `Fix the endpoint, then enable it again (events from while it was disabled are not resent; retry them from the delivery log): ${input.link}`,
  ].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>Last failure: ${escapeHtml(input.reason)}</p>
<p><a href="${escapeHtml(input.link)}">Fix the endpoint, then enable it again</a> (events from while it was disabled are not resent; retry them from the delivery log).</p>`;
  return { to: input.to, subject, text, html };
}

/** Tells an account that an automatic top-up did not go through. */
export function topupFailedMessage(input: { to: string; reason: string; retryAfter: Date | null; link: string }): OutgoingMessage {
  const subject = 'Your automatic top-up did not go through';
  const next = input.retryAfter
    ? `It will be tried again after ${input.retryAfter.toUTCString()}.`
    : 'It will be tried again when the balance is next below your threshold.';
  const lead = `We tried to add funds to your balance with your saved card, and the payment failed: ${input.reason}.`;
  const text = [lead, next, '', `Check the card or add funds now: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(next)}</p><p><a href="${escapeHtml(input.link)}">Check the card or add funds now</a></p>`;
  return { to: input.to, subject, text, html };
}

/**
 * Tells an account that one of its OAuth connections stopped working: the provider refused to renew
 * its access (the person revoked it there, changed their password, or it lapsed). One link reconnects
 * it; calls through it are refused (nothing charged) until then. Never a token.
 */
export function connectionRefreshFailedMessage(input: {
  to: string;
  provider: string;
  label: string;
  reason: string;
  link: string;
}): OutgoingMessage {
  const subject = `Reconnect ${input.provider}: your connection "${input.label}" stopped working`;
  const lead = `Your connection "${input.label}" to ${input.provider} needs you again: ${input.reason}.`;
  const effect = 'Calls through it are refused, and nothing is charged for them, until it is reconnected. Your other connections are not affected.';
  const action = 'Reconnect it';
  const text = [lead, effect, '', `${action}: ${input.link}`].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p>${escapeHtml(effect)}</p><p><a href="${escapeHtml(input.link)}">${escapeHtml(action)}</a></p>`;
  return { to: input.to, subject, text, html };
}

const dollars = (value: unknown) =>
  typeof value === 'number' ? `$${value.toFixed(value % 1 === 0 ? 2 : Math.min(6, String(value).split('.')[1]?.length ?? 2))}` : String(value);

/** An account event the owner asked to get by e-mail (PUT /notifications/email). */
export function accountEventMessage(input: { to: string; type: string; data: Record<string, unknown>; origin: string }): OutgoingMessage {
  const d = input.data;
  const session = typeof d.sessionId === 'string' ? d.sessionId : null;
  const [subject, lead, link] = ((): [string, string, string] => {
    switch (input.type) {
      case 'balance.low':
        return ['Your balance is low', `Your balance is ${dollars(d.balance)}, below the ${dollars(d.threshold)} you set.`, `${input.origin}/`];
      case 'balance.depleted':
        return [
          'Your balance is used up',
          `Your balance is ${dollars(d.balance)}: calls that cost money are refused until you add funds.`,
          `${input.origin}/`,
        ];
      case 'topup.succeeded':
        return ['Funds added', `${dollars(d.amount)} was added to your balance.`, `${input.origin}/`];
      case 'session.completed':
      case 'session.failed':
      case 'session.expired':
        return [
          `Session ${input.type.slice('session.'.length)}: ${String(d.cookbookId ?? '')}`,
          `Cookbook session ${session ?? ''} ${input.type.slice('session.'.length)}${d.outcome ? ` (outcome: ${String(d.outcome)})` : ''}.`,
          `${input.origin}/sessions/${encodeURIComponent(session ?? '')}`,
        ];
      case 'key.revoked':
        return [
          'A key was revoked',
          `The ${d.kind === 'agent' ? 'agent key' : 'API key'} "${String(d.name ?? '')}" (${String(d.prefix ?? '')}...) was revoked; calls with it are refused.`,
          `${input.origin}/keys`,
        ];
      default:
        return [`Account event: ${input.type}`, `Event ${input.type} happened on your account.`, `${input.origin}/`];
    }
  })();
  const text = [
    lead,
    '',
    `Open the dashboard: ${link}`,
    '',
    'You get this e-mail because your account asked for it (PUT /api/v1/notifications/email).',
  ].join('\n');
  const html = `<p>${escapeHtml(lead)}</p><p><a href="${escapeHtml(link)}">Open the dashboard</a></p><p><small>You get this e-mail because your account asked for it.</small></p>`;
  return { to: input.to, subject, text, html };
}
