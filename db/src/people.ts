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
 * link cannot both succeed); null when the token is no longer live. The link came by e-mail, so the
 * address counts as verified from now on.
 */
export async function resetPasswordWithToken(db: Db, tokenHash: Buffer, passwordHash: string): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    update people set password_hash = ${passwordHash}, reset_token_hash = null, reset_expires_at = null,
           email_verified_at = coalesce(email_verified_at, now())
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

/** Whether a person's address is verified, and the address change they asked for, if any. */
export interface PersonEmailState {
  id: string;
  email: string;
  email_verified_at: Date | null;
  pending_email: string | null;
}

export async function getPersonEmailState(db: Db, id: string): Promise<PersonEmailState | null> {
  const [row] = await db<PersonEmailState[]>`select id, email, email_verified_at, pending_email from people where id = ${id}`;
  return row ?? null;
}

/** The owner's address state of an account; null for an account no person owns (or none at all). */
export async function getOwnerEmailState(db: Db, accountId: string): Promise<PersonEmailState | null> {
  const [row] = await db<PersonEmailState[]>`
    select p.id, p.email, p.email_verified_at, p.pending_email
      from accounts a join people p on p.id = a.owner_person_id where a.id = ${accountId}`;
  return row ?? null;
}

/**
 * Stores a fresh verification token's hash for a person whose address is not verified yet (an
 * earlier link stops working); null when the person is gone or already verified.
 */
export async function setVerifyToken(db: Db, personId: string, tokenHash: Buffer, expiresAt: Date): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    update people set verify_token_hash = ${tokenHash}, verify_expires_at = ${expiresAt}
     where id = ${personId} and email_verified_at is null
     returning id, email, created_at`;
  return row ?? null;
}

/** Marks the address behind a live verification token verified, spending the token; null when it is not live. */
export async function verifyEmailWithToken(db: Db, tokenHash: Buffer): Promise<PersonRow | null> {
  const [row] = await db<PersonRow[]>`
    update people set email_verified_at = now(), verify_token_hash = null, verify_expires_at = null
     where verify_token_hash = ${tokenHash} and verify_expires_at > now()
     returning id, email, created_at`;
  return row ?? null;
}

/** Marks a person's current address verified (they opened another link mailed to it). */
export async function markEmailVerified(db: Db, personId: string): Promise<void> {
  await db`
    update people set email_verified_at = coalesce(email_verified_at, now()), verify_token_hash = null, verify_expires_at = null
     where id = ${personId}`;
}

/** Records the address a person wants to change to; any earlier pending change (and its link) is replaced. */
export async function setPendingEmail(db: Db, personId: string, email: string | null): Promise<boolean> {
  const rows = await db`
    update people set pending_email = ${email}, email_change_token_hash = null, email_change_expires_at = null
     where id = ${personId} returning id`;
  return rows.length > 0;
}

/**
 * Stores a fresh e-mail change token's hash for a person with a pending address; null when the person
 * is gone or has no pending change (it was cancelled or confirmed before the e-mail went out).
 */
export async function setEmailChangeToken(
  db: Db,
  personId: string,
  tokenHash: Buffer,
  expiresAt: Date,
): Promise<{ id: string; email: string; pending_email: string } | null> {
  const [row] = await db<{ id: string; email: string; pending_email: string }[]>`
    update people set email_change_token_hash = ${tokenHash}, email_change_expires_at = ${expiresAt}
     where id = ${personId} and pending_email is not null
     returning id, email, pending_email`;
  return row ?? null;
}

/**
 * Moves a person to their pending address with a live change token, spending the token in the same
 * statement; the new address counts as verified (the link proved it). The accounts they own and
 * their approver memberships follow in the caller's transaction. Null when the token is not live.
 */
export async function confirmEmailChangeWithToken(db: Db, tokenHash: Buffer): Promise<{ id: string; email: string; previous_email: string } | null> {
  const [row] = await db<{ id: string; email: string; previous_email: string }[]>`
    update people p
       set email = p.pending_email, email_verified_at = now(), pending_email = null,
           email_change_token_hash = null, email_change_expires_at = null,
           verify_token_hash = null, verify_expires_at = null
      from (select id, email from people where email_change_token_hash = ${tokenHash} and email_change_expires_at > now() for update) old
     where p.id = old.id
     returning p.id, p.email, old.email as previous_email`;
  return row ?? null;
}

/** Whether an address is taken: a person signs in with it or an account is named by it (any letter case). */
export async function emailInUse(db: Db, email: string): Promise<boolean> {
  const [row] = await db<{ taken: boolean }[]>`
    select exists (select 1 from people where lower(email) = lower(${email}))
        or exists (select 1 from accounts where lower(email) = lower(${email})) as taken`;
  return row?.taken ?? false;
}

/** After a person's address changed: the account they own and their live approver memberships carry the new one. */
export async function followPersonEmail(db: Db, personId: string, email: string): Promise<void> {
  await db`update accounts set email = ${email}, updated_at = now() where owner_person_id = ${personId}`;
  await db`update account_members set email = ${email} where person_id = ${personId} and removed_at is null`;
}
