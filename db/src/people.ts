import { newId } from '#contracts/key-format';
import type { Db } from './sql.js';

/** A person: one login (an e-mail address and a password), whatever accounts they belong to. */
export interface PersonRow {
  id: string;
  email: string;
  created_at: Date;
}

/** The person who signs in with this address (any letter case), with the password hash to check. */
export async function findPersonByEmail(db: Db, email: string): Promise<(PersonRow & { password_hash: string | null }) | null> {
  const [row] = await db<(PersonRow & { password_hash: string | null })[]>`
    select id, email, created_at, password_hash from people where lower(email) = lower(${email})`;
  return row ?? null;
}

export async function getPerson(db: Db, id: string): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`select id, email, created_at from people where id = ${id}`;
  return row ?? null;
}

/** Creates a person; null when the address already signs in (compared case-insensitively). */
export async function createPerson(db: Db, input: { email: string; passwordHash: string }): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    insert into people (id, email, password_hash) values (${newId('per')}, ${input.email}, ${input.passwordHash})
    on conflict ((lower(email))) do nothing
    returning id, email, created_at`;
  return row ?? null;
}

/** One account a person may work in: the one they own, or one they approve for. */
export interface MembershipRow {
  account_id: string;
  account_email: string;
  role: 'owner' | 'approver';
  /** The approver membership; null for the owner. */
  member_id: string | null;
  member_email: string | null;
}

/**
 * The accounts a person belongs to: the one they own first, then those they approve for (accepted,
 * not removed), oldest first.
 */
export async function listMemberships(db: Db, personId: string): Promise<MembershipRow[]> {
  return db<MembershipRow[]>`
    select account_id, account_email, role, member_id, member_email from (
      select id as account_id, email as account_email, 'owner' as role, null::text as member_id, null::text as member_email, 0 as rank, created_at as since
        from accounts where owner_person_id = ${personId}
      union all
      select a.id, a.email, 'approver', m.id, m.email, 1, m.accepted_at
        from account_members m join accounts a on a.id = m.account_id
       where m.person_id = ${personId} and m.removed_at is null and m.accepted_at is not null) memberships
     order by rank, since, account_id`;
}

/**
 * Stores a fresh reset token's hash for a person (replacing any earlier one, so only the newest link
 * works); false when the person is gone.
 */
export async function setResetToken(db: Db, personId: string, tokenHash: Buffer, expiresAt: Date): Promise<boolean> {
  const rows = await db`update people set reset_token_hash = ${tokenHash}, reset_expires_at = ${expiresAt} where id = ${personId} returning id`;
  return rows.length > 0;
}

/** The person whose live (unexpired) reset token has this hash; null for a spent, expired, replaced or unknown one. */
export async function findPersonByResetToken(db: Db, tokenHash: Buffer): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    select id, email, created_at from people where reset_token_hash = ${tokenHash} and reset_expires_at > now()`;
  return row ?? null;
}

/**
 * Sets a new password with a reset token, spending the token in the same statement (two uses of one
 * link cannot both succeed); null when the token is no longer live.
 */
export async function resetPasswordWithToken(db: Db, tokenHash: Buffer, passwordHash: string): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    update people set password_hash = ${passwordHash}, reset_token_hash = null, reset_expires_at = null
     where reset_token_hash = ${tokenHash} and reset_expires_at > now()
     returning id, email, created_at`;
  return row ?? null;
}

/** The person with their password hash (to check a current password before changing it). */
export async function getPersonWithPassword(db: Db, id: string): Promise<(PersonRow & { password_hash: string | null }) | null> {
  const [row] = await db<(PersonRow & { password_hash: string | null })[]>`
    select id, email, created_at, password_hash from people where id = ${id}`;
  return row ?? null;
}

/** Sets a person's password; any pending reset link stops working. */
export async function setPassword(db: Db, personId: string, passwordHash: string): Promise<boolean> {
  const rows = await db`
    update people set password_hash = ${passwordHash}, reset_token_hash = null, reset_expires_at = null where id = ${personId} returning id`;
  return rows.length > 0;
}
