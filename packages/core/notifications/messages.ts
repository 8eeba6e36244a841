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
