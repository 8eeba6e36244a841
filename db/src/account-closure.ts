import { SESSION_COLUMNS, type SessionRow } from './cookbook-sessions.js';
import type { Db } from './sql.js';

/** What closing an account changed, for the answer and the caches to forget. */
export interface ClosedAccount {
  /** Keys that were live (enabled or disabled) and are revoked now. */
  revokedKeyIds: string[];
  /** What the balance still held (less money that in-flight calls hold), written off by a `forfeit` entry. */
  forfeitedMicros: bigint;
  dashboardSessionsEnded: number;
}

/**
 * Closes an account inside the caller's transaction: every key revoked, every dashboard session in it
 * ended, its approvers removed, stored third-party credentials, webhook endpoints, what discovery listed
 * to it and pending connect requests deleted, auto top-up off and the saved card forgotten, what the balance still holds written
 * off, and the row's personal data replaced (the address becomes `placeholderEmail`, the owner is
 * unlinked). The row itself stays, so its ledger does. Null when the account is gone or closed already.
 */
export async function closeAccount(db: Db, accountId: string, placeholderEmail: string): Promise<ClosedAccount | null> {
  const [account] = await db<{ balance_micros: bigint; held_micros: bigint }[]>`
    select balance_micros, held_micros from accounts where id = ${accountId} and deleted_at is null for update`;
  if (!account) return null;
  const keys = await db<{ id: string }[]>`
    update api_keys set status = 'revoked', revoked_at = now(), updated_at = now()
     where account_id = ${accountId} and status <> 'revoked' returning id`;
  const sessions = await db`
    update dashboard_sessions set revoked_at = now() where account_id = ${accountId} and revoked_at is null returning id`;
  await db`
    update account_members set removed_at = now(), invite_token_hash = null, invite_expires_at = null
     where account_id = ${accountId} and removed_at is null`;
  await db`delete from connections where account_id = ${accountId}`;
  await db`delete from oauth_connections where account_id = ${accountId}`;
  await db`update connect_requests set status = 'cancelled' where account_id = ${accountId} and status = 'pending'`;
  await db`delete from webhook_endpoints where account_id = ${accountId}`;
  await db`delete from discovery_listings where account_id = ${accountId}`;
  // Money that in-flight calls hold settles through their holds; the rest is written off now.
  const forfeitedMicros = account.balance_micros - account.held_micros > 0n ? account.balance_micros - account.held_micros : 0n;
  if (forfeitedMicros > 0n) {
    await db`
      with debited as (
        update accounts set balance_micros = balance_micros - ${forfeitedMicros}, updated_at = now()
         where id = ${accountId} returning balance_micros
      )
      insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, description)
      select ${accountId}, 'forfeit', ${-forfeitedMicros}, balance_micros, 'balance written off when the account was deleted' from debited`;
  }
  await db`
    update accounts
       set email = ${placeholderEmail}, owner_person_id = null, password_hash = null, deleted_at = now(), updated_at = now(),
           stripe_customer_id = null, auto_topup_enabled = false, auto_topup_payment_method = null, auto_topup_last_error = null,
           email_event_types = '{}'
     where id = ${accountId}`;
  return { revokedKeyIds: keys.map((k) => k.id), forfeitedMicros, dashboardSessionsEnded: sessions.length };
}

/**
 * Erases a person's login inside the caller's transaction: their approver memberships in other
 * accounts end (those accounts keep the address they invited, as their record of who approved), and
 * the person's row goes with its sessions. False when the person is gone.
 */
export async function erasePerson(db: Db, personId: string): Promise<boolean> {
  await db`update dashboard_sessions set revoked_at = now() where person_id = ${personId} and revoked_at is null`;
  await db`update account_members set removed_at = coalesce(removed_at, now()), person_id = null where person_id = ${personId}`;
  await db`update accounts set owner_person_id = null where owner_person_id = ${personId}`;
  const rows = await db`delete from people where id = ${personId} returning id`;
  return rows.length > 0;
}

/** The account's sessions that have not ended (running or waiting for a human): those to cancel. */
export function listUnendedSessions(db: Db, accountId: string): Promise<SessionRow[]> {
  return db<SessionRow[]>`
    select ${db.unsafe(SESSION_COLUMNS)} from cookbook_sessions
     where account_id = ${accountId} and status in ('running', 'waiting_for_human') order by started_at`;
}
