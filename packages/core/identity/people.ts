import { getAccount } from '#db/accounts';
import { getLiveMember } from '#db/members';
import { findPersonByEmail, listMemberships, type MembershipRow, type PersonRow } from '#db/people';
import type { Db } from '#db/sql';
import { PlatformError } from '#core/platform';
import { verifyPassword } from './passwords.js';

/**
 * A person who proved their password, with the accounts they belong to (owned first). Null for a
 * wrong password, an unknown address, or a person who belongs to no account any more (every
 * membership removed): all three look the same to the caller, and cost the same scrypt work.
 */
export async function authenticatePerson(
  db: Db,
  email: string,
  password: string,
): Promise<{ person: PersonRow; memberships: MembershipRow[] } | null> {
  const person = await findPersonByEmail(db, email);
  const passwordOk = await verifyPassword(password, person?.password_hash ?? null);
  if (!person || !passwordOk) return null;
  const memberships = await listMemberships(db, person.id);
  if (memberships.length === 0) return null;
  return { person: { id: person.id, email: person.email, created_at: person.created_at }, memberships };
}

export { listMemberships };
export type { MembershipRow, PersonRow };

/** The id of the person who signs in with this address; null when nobody does. */
export async function personIdByEmail(db: Db, email: string): Promise<string | null> {
  return (await findPersonByEmail(db, email))?.id ?? null;
}

/**
 * The account a caller acts in and, for an approver, the approver: 401 `invalid_session` when the
 * account is gone or the approver was removed since the credential was issued.
 */
export async function callerIdentity(
  db: Db,
  caller: { accountId: string; memberId: string | null },
): Promise<{ account: { id: string; email: string }; member: { id: string; email: string } | null }> {
  const row = await getAccount(db, caller.accountId);
  if (!row) throw new PlatformError('invalid_session', 'Account no longer exists');
  const member = caller.memberId === null ? null : await getLiveMember(db, caller.memberId);
  if (caller.memberId !== null && !member) throw new PlatformError('invalid_session', 'This approver has been removed');
  return { account: { id: row.id, email: row.email }, member: member ? { id: member.id, email: member.email } : null };
}
