import type { Db, Sql } from './sql.js';

// The database half of retention (the job lives in packages/core/platform/retention.ts). Each
// statement works on a bounded batch, so a large backlog never holds long locks.

/**
 * Deletes usage events older than `before` (usage_daily keeps their totals), at most `batch` rows.
 * In the same transaction the refund reconciler's horizon moves up to `before`: it treats a charge
 * without a usage event as owed a refund, so it must never look at charges whose events are gone.
 */
export async function pruneUsageEvents(sql: Sql, before: Date, batch: number): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`update refund_reconciliation set charges_since = greatest(charges_since, ${before})`;
    const deleted = await tx`
      delete from usage_events where id in (select id from usage_events where at < ${before} order by at limit ${batch})`;
    return deleted.count;
  });
}

/**
 * Sessions that ended before `before` and were not pruned yet: their step results are cleared and
 * the session is marked pruned. Returns the ids, so the caller can delete their event streams.
 */
export async function pruneEndedSessions(db: Db, before: Date, batch: number): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    with due as (
      select id from cookbook_sessions
       where ended_at is not null and ended_at < ${before} and pruned_at is null
       order by ended_at limit ${batch}
       for update skip locked
    ), cleared as (
      update cookbook_session_steps set result_data = null where session_id in (select id from due) and result_data is not null
    )
    update cookbook_sessions set pruned_at = now() where id in (select id from due) returning id`;
  return rows.map((row) => row.id);
}

/** Dashboard sessions expired or revoked more than `graceMs` ago. */
export async function pruneDashboardSessions(db: Db, before: Date, batch: number): Promise<number> {
  const deleted = await db`
    delete from dashboard_sessions where id in (
      select id from dashboard_sessions where expires_at < ${before} or revoked_at < ${before} limit ${batch})`;
  return deleted.count;
}

/**
 * The tables every metered call writes or updates, which need vacuum and fresh planner statistics:
 * their dead row versions (accounts, credit holds and daily totals are updated many times a second)
 * and their growth (the ledger, usage events).
 */
export const METERED_TABLES = ['accounts', 'credit_holds', 'ledger_entries', 'usage_daily', 'usage_events'] as const;

/**
 * The hot tables autovacuum does not look after: all of them when the server runs with autovacuum
 * off, else those that turned it off themselves (`autovacuum_enabled = false`). The queue workers warn
 * about them at start: without vacuum, dead row versions pile up under the money path's look-ups,
 * and without analysis prepared statements keep plans made while a table was small.
 */
export async function tablesWithoutAutovacuum(db: Db): Promise<string[]> {
  const rows = await db<{ relname: string }[]>`
    select c.relname from pg_class c
     where c.relname = any(${[...METERED_TABLES]}::text[]) and c.relnamespace = to_regnamespace(current_schema())
       and (current_setting('autovacuum') = 'off'
            -- Kept as written ("false", "off", "0", "no" ...): read as a boolean.
            or exists (select 1 from unnest(c.reloptions) o
                        where split_part(o, '=', 1) = 'autovacuum_enabled' and not split_part(o, '=', 2)::boolean))
     order by c.relname`;
  return rows.map((r) => r.relname);
}
