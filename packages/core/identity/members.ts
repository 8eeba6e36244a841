import { createHash, randomBytes } from 'node:crypto';
import { getAccount } from '#db/accounts';
import { acceptInvite, findInvitedMember, getLiveMember, insertMember, setInviteToken, type MemberRow } from '#db/members';
import { assertPasswordPolicy, hashPassword } from './passwords.js';
import type { Db } from '#db/sql';
import { PlatformError } from '#core/platform';

// Approvers: people an account invites by e-mail to see and complete its human steps, and nothing
// else. The edge invites (a row, then an e-mail job by reference); the worker mints the one-time
// token when it sends, so the token exists only as a hash here and in the recipient's mailbox.

const tokenHash = (token: string) => createHash('sha256').update(token).digest();

export interface MemberView {
  id: string;
  email: string;
  role: 'approver';
  status: 'invited' | 'active';
  invitedAt: string;
  acceptedAt: string | null;
}

export function memberView(row: MemberRow): MemberView {
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    status: row.accepted_at ? 'active' : 'invited',
    invitedAt: row.invited_at.toISOString(),
    acceptedAt: row.accepted_at?.toISOString() ?? null,
  };
}

/** Adds an approver to an account; 409 when the address already signs in somewhere. */
export async function inviteMember(db: Db, input: { accountId: string; email: string }): Promise<MemberRow> {
  const row = await insertMember(db, { accountId: input.accountId, email: input.email, role: 'approver' });
  if (!row) {
    throw new PlatformError('conflict', 'This e-mail address already has an account or is an approver', {
      hint: 'An address signs in as one person: invite another address, or remove the existing membership first.',
    });
  }
  return row;
}

/**
 * Mints a fresh one-time invitation link for a member who has not accepted yet (the previous link
 * stops working). Null when the member was removed or has accepted since the e-mail was asked for.
 */
export async function mintInviteLink(
  db: Db,
  settings: { PUBLIC_URL: string; INVITE_TTL_HOURS: number },
  memberId: string,
): Promise<{ member: MemberRow; invitedBy: string; link: string; expiresAt: Date } | null> {
  const member = await getLiveMember(db, memberId);
  if (!member || member.accepted_at) return null;
  const account = await getAccount(db, member.account_id);
  if (!account) return null;
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + settings.INVITE_TTL_HOURS * 3_600_000);
  if (!(await setInviteToken(db, member.id, tokenHash(token), expiresAt))) return null;
  // The token rides in the fragment: browsers never send it to the server, so no access log holds it.
  const link = `${new URL(settings.PUBLIC_URL).origin}/accept-invite#token=${token}`;
  return { member, invitedBy: account.email, link, expiresAt };
}

/**
 * Accepts an invitation with the password the person chose (the password policy applies, checked
 * against their address); 400 when the link is spent, expired, replaced or wrong.
 */
export async function acceptInvitation(db: Db, token: string, password: string): Promise<MemberRow> {
  const invalid = () =>
    new PlatformError('validation_failed', 'This invitation link is not valid: it was used already, has expired or was replaced by a newer one', {
      hint: 'Ask the account owner to send the invitation again.',
    });
  const hash = tokenHash(token);
  const invited = await findInvitedMember(db, hash);
  if (!invited) throw invalid();
  assertPasswordPolicy(password, invited.email);
  // The token is spent by the update itself, so two acceptances of one link cannot both succeed.
  const member = await acceptInvite(db, hash, await hashPassword(password));
  if (!member) throw invalid();
  return member;
}
