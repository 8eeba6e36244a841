import { newId } from '#contracts/key-format';
import type { Db } from './sql.js';

export interface DashboardSessionRow {
  id: string;
  account_id: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

/** Opens a dashboard session; its id becomes the JWT's `jti`. Expired rows are swept on the way. */
export async function createDashboardSession(db: Db, input: { accountId: string; expiresAt: Date }): Promise<DashboardSessionRow> {
  await db`delete from dashboard_sessions where id in (
    select id from dashboard_sessions where expires_at < now() - interval '1 day' limit 100)`;
  const [row] = await db<DashboardSessionRow[]>`
    insert into dashboard_sessions (id, account_id, expires_at)
    values (${newId('dsh')}, ${input.accountId}, ${input.expiresAt})
    returning id, account_id, created_at, expires_at, revoked_at`;
  if (!row) throw new Error('insert returned no row');
  return row;
}

/** The live session with this id, or null when it is unknown, revoked or expired. */
export async function findLiveDashboardSession(db: Db, id: string): Promise<DashboardSessionRow | null> {
  const [row] = await db<DashboardSessionRow[]>`
    select id, account_id, created_at, expires_at, revoked_at from dashboard_sessions
     where id = ${id} and revoked_at is null and expires_at > now()`;
  return row ?? null;
}

/** Ends a session for good; returns false when it was already ended or never existed. */
export async function revokeDashboardSession(db: Db, id: string): Promise<boolean> {
  const rows = await db`update dashboard_sessions set revoked_at = now() where id = ${id} and revoked_at is null returning id`;
  return rows.length > 0;
}
