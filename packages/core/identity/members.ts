import { createHash, randomBytes } from 'node:crypto';
import { getAccount } from '#db/accounts';
import {
  acceptInvite,
  findInvitedMember,
  findMember,
  getLiveMember,
  insertMember,
  listMembers,
  removeMember,
  setInviteToken,
  type MemberRow,
} from '#db/members';
import { createPerson, findPersonByEmail, markEmailVerified, type PersonRow } from '#db/people';
import { assertPasswordPolicy, hashPassword, verifyPassword } from './passwords.js';
import type { Db } from '#db/sql';
import { notFound, PlatformError } from '#core/platform';

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

/**
 * Invites an address as an approver of an account. The answer never depends on whether the address
 * signs in elsewhere (no enumeration, nothing reserved beyond this account); 409 only for what the
 * account itself holds: the address is already invited to or an approver of it, or is its own.
 */
export async function inviteMember(db: Db, input: { accountId: string; email: string }): Promise<MemberRow> {
  const account = await getAccount(db, input.accountId);
  if (account && account.email.toLowerCase() === input.email.toLowerCase()) {
    throw new PlatformError('conflict', "This is the account's own address", {
      hint: 'The owner already sees and completes every human step; invite someone else.',
    });
  }
  const row = await insertMember(db, { accountId: input.accountId, email: input.email, role: 'approver' });
  if (!row) {
    throw new PlatformError('conflict', 'This address is already invited to or an approver of this account', {
      hint: 'Find it in GET /api/v1/members; send a pending invitation again with POST /api/v1/members/{id}/resend-invite.',
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
): Promise<{ member: MemberRow; link: string; expiresAt: Date } | null> {
  const member = await getLiveMember(db, memberId);
  if (!member || member.accepted_at) return null;
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + settings.INVITE_TTL_HOURS * 3_600_000);
  if (!(await setInviteToken(db, member.id, tokenHash(token), expiresAt))) return null;
  // The token rides in the fragment: browsers never send it to the server, so no access log holds it.
  const link = `${new URL(settings.PUBLIC_URL).origin}/accept-invite#token=${token}`;
  return { member, link, expiresAt };
}

/**
 * Accepts an invitation. A new address chooses its password here (the policy applies, checked against
 * the address); an address that already signs in (owner of an account, approver of others) proves it
 * with its own password, and the membership joins that login: one person, one password. 400 when the
 * link is spent, expired, replaced or wrong; 401 for a wrong password of an existing login (the link
 * still works).
 */
export async function acceptInvitation(db: Db, token: string, password: string): Promise<{ member: MemberRow; person: PersonRow }> {
  const invalid = () =>
    new PlatformError('validation_failed', 'This invitation link is not valid: it was used already, has expired or was replaced by a newer one', {
      hint: 'Ask the account owner to send the invitation again.',
    });
  const hash = tokenHash(token);
  const invited = await findInvitedMember(db, hash);
  if (!invited) throw invalid();
  const existing = await findPersonByEmail(db, invited.email);
  let person: PersonRow;
  if (existing) {
    if (!(await verifyPassword(password, existing.password_hash))) {
      throw new PlatformError('invalid_credentials', 'This address already signs in: enter the password you sign in with', {
        hint: 'Accepting adds this account to your existing login, so use its password; the invitation link still works.',
      });
    }
    person = existing;
  } else {
    assertPasswordPolicy(password, invited.email);
    const created = await createPerson(db, { email: invited.email, passwordHash: await hashPassword(password) });
    // Another invitation to the same new address was accepted at the same moment and chose the password.
    if (!created)
      throw new PlatformError('conflict', 'This address started signing in a moment ago', {
        hint: 'Open the link again and enter the password you just chose.',
      });
    person = created;
  }
  // The token is spent by the update itself, so two acceptances of one link cannot both succeed.
  const member = await acceptInvite(db, hash, person.id);
  if (!member) throw invalid();
  // The invitation came by e-mail to this address: opening it proves the mailbox.
  await markEmailVerified(db, person.id);
  return { member, person: { id: person.id, email: person.email, created_at: person.created_at } };
}

/** The account's approvers, invited and active. */
export function listApprovers(db: Db, accountId: string): Promise<MemberRow[]> {
  return listMembers(db, accountId);
}

/** One of the account's approvers; 404 for an id that is not one. */
export async function requireApprover(db: Db, accountId: string, memberId: string): Promise<MemberRow> {
  const member = await findMember(db, accountId, memberId);
  if (!member) throw notFound(`Approver ${memberId}`, 'List approvers with GET /api/v1/members.');
  return member;
}

/**
 * Removes an approver of the account (their sessions end, an unused invitation stops working,
 * their assigned steps go back to the first taker); false when the account has no such approver.
 */
export function removeApprover(db: Db, accountId: string, memberId: string): Promise<boolean> {
  return removeMember(db, accountId, memberId);
}
