import { newId } from '#contracts/key-format';
import type { Db } from './sql.js';

export type MemberRole = 'approver';

export interface MemberRow {
  id: string;
  account_id: string;
  email: string;
  role: MemberRole;
  invited_at: Date;
  invite_expires_at: Date | null;
  accepted_at: Date | null;
}

const MEMBER_COLUMNS = 'id, account_id, email, role, invited_at, invite_expires_at, accepted_at';

/**
 * Invites an address to one account; null when it is already invited to or an approver of that
 * account. Nothing else is checked: whether the address signs in elsewhere (owns an account, approves
 * for others) is none of the inviting account's business, and an invitation reserves the address in
 * its own account only. The invitation token is minted later, when the e-mail is sent (see
 * setInviteToken), so it never sits in a queue.
 */
export async function insertMember(db: Db, input: { accountId: string; email: string; role: MemberRole }): Promise<MemberRow | null> {
  const rows = await db<MemberRow[]>`
    insert into account_members (id, account_id, email, role)
    values (${newId('mbr')}, ${input.accountId}, ${input.email}, ${input.role})
    on conflict (account_id, lower(email)) where removed_at is null do nothing
    returning ${db.unsafe(MEMBER_COLUMNS)}`;
  return rows[0] ?? null;
}

export async function listMembers(db: Db, accountId: string): Promise<MemberRow[]> {
  return db<MemberRow[]>`
    select ${db.unsafe(MEMBER_COLUMNS)} from account_members
     where account_id = ${accountId} and removed_at is null order by invited_at, id`;
}

export async function findMember(db: Db, accountId: string, memberId: string): Promise<MemberRow | null> {
  const [row] = await db<MemberRow[]>`
    select ${db.unsafe(MEMBER_COLUMNS)} from account_members
     where id = ${memberId} and account_id = ${accountId} and removed_at is null`;
  return row ?? null;
}

/** A live member by id, whatever the account (the e-mail job and sign-in). */
export async function getLiveMember(db: Db, memberId: string): Promise<MemberRow | null> {
  const [row] = await db<MemberRow[]>`select ${db.unsafe(MEMBER_COLUMNS)} from account_members where id = ${memberId} and removed_at is null`;
  return row ?? null;
}

/**
 * Stores the hash of a fresh invitation token (replacing any earlier one, so only the newest e-mail's
 * link works). False when the member was removed or has already accepted.
 */
export async function setInviteToken(db: Db, memberId: string, tokenHash: Buffer, expiresAt: Date): Promise<boolean> {
  const rows = await db`
    update account_members set invite_token_hash = ${tokenHash}, invite_expires_at = ${expiresAt}
     where id = ${memberId} and removed_at is null and accepted_at is null returning id`;
  return rows.length > 0;
}

/** The member a live (unspent, unexpired) invitation token belongs to. */
export async function findInvitedMember(db: Db, tokenHash: Buffer): Promise<MemberRow | null> {
  const [row] = await db<MemberRow[]>`
    select ${db.unsafe(MEMBER_COLUMNS)} from account_members
     where invite_token_hash = ${tokenHash} and invite_expires_at > now() and removed_at is null`;
  return row ?? null;
}

/**
 * Accepts an invitation for a person (who signs in with their own password): the membership becomes
 * theirs and the token is spent, in one statement, so a token works once. Null when the token is
 * unknown, spent or expired.
 */
export async function acceptInvite(db: Db, tokenHash: Buffer, personId: string): Promise<MemberRow | null> {
  const [row] = await db<MemberRow[]>`
    update account_members set person_id = ${personId}, accepted_at = now(), invite_token_hash = null, invite_expires_at = null
     where invite_token_hash = ${tokenHash} and invite_expires_at > now() and removed_at is null
    returning ${db.unsafe(MEMBER_COLUMNS)}`;
  return row ?? null;
}

/** Removes a member: their sessions end and their assignments go back to the first taker. */
export async function removeMember(db: Db, accountId: string, memberId: string): Promise<boolean> {
  const rows = await db`
    update account_members set removed_at = now(), invite_token_hash = null, password_hash = null
     where id = ${memberId} and account_id = ${accountId} and removed_at is null returning id`;
  if (rows.length === 0) return false;
  await db`update dashboard_sessions set revoked_at = now() where member_id = ${memberId} and revoked_at is null`;
  await db`delete from human_step_assignments where member_id = ${memberId}`;
  return true;
}

/** Assigns a human step to one approver, or (memberId null) back to the first taker. */
export async function assignHumanStep(db: Db, sessionId: string, stepId: string, memberId: string | null): Promise<void> {
  if (memberId === null) {
    await db`delete from human_step_assignments where session_id = ${sessionId} and step_id = ${stepId}`;
    return;
  }
  await db`
    insert into human_step_assignments (session_id, step_id, member_id) values (${sessionId}, ${stepId}, ${memberId})
    on conflict (session_id, step_id) do update set member_id = excluded.member_id, assigned_at = now()`;
}

/** The approver a step is assigned to, or null for the first taker. */
export async function findAssignee(db: Db, sessionId: string, stepId: string): Promise<{ id: string; email: string } | null> {
  const [row] = await db<{ id: string; email: string }[]>`
    select m.id, m.email from human_step_assignments a join account_members m on m.id = a.member_id
     where a.session_id = ${sessionId} and a.step_id = ${stepId} and m.removed_at is null`;
  return row ?? null;
}

export interface HumanStepAudienceRow {
  owner_email: string;
  cookbook_title: string;
  step_title: string | null;
  step_status: string | null;
  note: string | null;
  completer_name: string | null;
  assignee_email: string | null;
  /** Active approvers (accepted, not removed) of the account. */
  approver_emails: string[];
}

/**
 * Who hears about a human step, and what to tell them: the account's owner, its active approvers
 * and the step's assignee, with the step's title, state, note and who decided it.
 */
export async function findHumanStepAudience(db: Db, sessionId: string, stepId: string): Promise<HumanStepAudienceRow | null> {
  const [row] = await db<HumanStepAudienceRow[]>`
    select a.email as owner_email, c.title as cookbook_title,
           (select step->>'title' from jsonb_array_elements(c.steps) step where step->>'stepId' = ${stepId} limit 1) as step_title,
           st.status as step_status, st.note,
           coalesce(k.name, mb.email, pa.email) as completer_name,
           (select m.email from human_step_assignments ha join account_members m on m.id = ha.member_id
             where ha.session_id = s.id and ha.step_id = ${stepId} and m.removed_at is null) as assignee_email,
           coalesce((select array_agg(m.email order by m.invited_at) from account_members m
             where m.account_id = s.account_id and m.removed_at is null and m.accepted_at is not null), '{}') as approver_emails
      from cookbook_sessions s
      join accounts a on a.id = s.account_id
      join cookbooks c on c.id = s.cookbook_id
      left join cookbook_session_steps st on st.session_id = s.id and st.step_id = ${stepId}
      left join api_keys k on k.id = st.completed_by_key_id
      left join account_members mb on mb.id = st.completed_by_member_id
      left join accounts pa on pa.id = st.completed_by_person_id
     where s.id = ${sessionId}`;
  return row ?? null;
}

/** Of these member ids, the ones removed (or gone): their open event streams must close. */
export async function removedMembers(db: Db, memberIds: string[]): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    select id from unnest(${memberIds}::text[]) as ids(id)
     where not exists (select 1 from account_members m where m.id = ids.id and m.removed_at is null)`;
  return rows.map((row) => row.id);
}
