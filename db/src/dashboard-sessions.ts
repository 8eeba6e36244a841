import { newId } from '#contracts/key-format';
import type { Db } from './sql.js';

export interface DashboardSessionRow {
  id: string;
  account_id: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  /** Set when an approver (a member of the account), not the account's owner, signed in. */
  member_id: string | null;
  /** The person who signed in (null only for sessions opened before people existed and not matched). */
  person_id: string | null;
  /** The browser's User-Agent when the session opened (null for older sessions). */
  user_agent: string | null;
}

const COLUMNS = 'id, account_id, created_at, expires_at, revoked_at, member_id, person_id, user_agent';

/** Opens a dashboard session; its id becomes the JWT's `jti`. Expired rows are swept on the way. */
export async function createDashboardSession(
  db: Db,
  input: { accountId: string; memberId?: string | null; personId?: string | null; userAgent?: string | null; expiresAt: Date },
): Promise<DashboardSessionRow> {
  await db`delete from dashboard_sessions where id in (
    select id from dashboard_sessions where expires_at < now() - interval '1 day' limit 100)`;
  const [row] = await db<DashboardSessionRow[]>`
    insert into dashboard_sessions (id, account_id, member_id, person_id, user_agent, expires_at)
    values (${newId('dsh')}, ${input.accountId}, ${input.memberId ?? null}, ${input.personId ?? null}, ${input.userAgent?.slice(0, 300) ?? null}, ${input.expiresAt})
    returning ${db.unsafe(COLUMNS)}`;
  if (!row) throw new Error('insert returned no row');
  return row;
}

/**
 * The live session with this id, or null when it is unknown, revoked or expired, or when the member
 * who opened it has since been removed.
 */
export async function findLiveDashboardSession(db: Db, id: string): Promise<DashboardSessionRow | null> {
  const [row] = await db<DashboardSessionRow[]>`
    select s.id, s.account_id, s.created_at, s.expires_at, s.revoked_at, s.member_id, s.person_id, s.user_agent from dashboard_sessions s
     where s.id = ${id} and s.revoked_at is null and s.expires_at > now()
       and (s.member_id is null
            or exists (select 1 from account_members m where m.id = s.member_id and m.removed_at is null))`;
  return row ?? null;
}

/** Ends a session for good; returns false when it was already ended or never existed. */
export async function revokeDashboardSession(db: Db, id: string): Promise<boolean> {
  const rows = await db`update dashboard_sessions set revoked_at = now() where id = ${id} and revoked_at is null returning id`;
  return rows.length > 0;
}

/**
 * A person's live sessions across every account they belong to, newest first, with the account each
 * works in (sessions of a removed approver membership are left out, as they no longer work).
 */
export async function listLivePersonSessions(db: Db, personId: string): Promise<(DashboardSessionRow & { account_email: string })[]> {
  return db<(DashboardSessionRow & { account_email: string })[]>`
    select s.id, s.account_id, s.created_at, s.expires_at, s.revoked_at, s.member_id, s.person_id, s.user_agent, a.email as account_email
      from dashboard_sessions s join accounts a on a.id = s.account_id
     where s.person_id = ${personId} and s.revoked_at is null and s.expires_at > now()
       and (s.member_id is null
            or exists (select 1 from account_members m where m.id = s.member_id and m.removed_at is null))
     order by s.created_at desc, s.id
     limit 200`;
}

/** Ends every live session of a person, but for `exceptId` (the one asking) when given; the number ended. */
export async function revokePersonSessions(db: Db, personId: string, exceptId: string | null = null): Promise<number> {
  const rows = await db`
    update dashboard_sessions set revoked_at = now()
     where person_id = ${personId} and revoked_at is null and expires_at > now() and (${exceptId}::text is null or id <> ${exceptId}::text)
     returning id`;
  return rows.length;
}
