// Discovery's feedback (issue 35, docs/decisions/discovery-feedback.md): the APIs each discovery
// listed to an account, and per API how many accounts went on to use it.
import type { Db } from './sql.js';

export interface DiscoveryListing {
  accountId: string;
  at: Date;
  /** The listed APIs' ids, best first. */
  apiIds: string[];
}

/**
 * Stores listings in one statement, each listing's ids in their order. A listing whose account was
 * closed or deleted meanwhile is skipped (closing deletes an account's listings; one noted just before
 * must not come back after) rather than failing the others.
 */
export async function recordDiscoveryListings(db: Db, listings: readonly DiscoveryListing[]): Promise<number> {
  if (listings.length === 0) return 0;
  const rows = listings.map((l) => ({ account_id: l.accountId, at: l.at.toISOString(), api_ids: l.apiIds }));
  const inserted = await db`
    insert into discovery_listings (account_id, at, api_ids)
    select x.account_id, x.at, array(select e.id from jsonb_array_elements_text(x.api_ids) with ordinality as e(id, n) order by e.n)
      from jsonb_to_recordset(${db.json(rows)}::jsonb) as x(account_id uuid, at timestamptz, api_ids jsonb)
     where exists (select 1 from accounts a where a.id = x.account_id and a.deleted_at is null)`;
  return inserted.count;
}

/**
 * Per API, the accounts that used it from `days` days ago (UTC) to today: `used` counts the accounts that
 * made a successful call to it or hold a connection to it (counted only for an account that made a
 * successful call to anything in the window), `followed` the accounts with a successful call to it on the
 * (UTC) day a discovery listed it to them or the day after (calls are counted by day, so one earlier that
 * same day counts too). APIs nobody used are absent.
 */
export async function discoveryFeedback(db: Db, days: number): Promise<Map<string, { used: number; followed: number }>> {
  const rows = await db<{ api_id: string; used: number; followed: number }[]>`
    with since as (
      select (now() at time zone 'UTC')::date - ${days}::int as day
    ),
    called as (
      select distinct account_id, api_id from usage_daily
       where day >= (select day from since) and calls > errors
    ),
    active as (
      select distinct account_id from called
    ),
    used as (
      select account_id, api_id from called
      union
      select c.account_id, c.api_id from connections c join active using (account_id)
    ),
    followed as (
      select distinct l.account_id, listed.api_id
        from discovery_listings l
        cross join lateral unnest(l.api_ids) as listed(api_id)
        join usage_daily u on u.account_id = l.account_id and u.api_id = listed.api_id
                          and u.day between (l.at at time zone 'UTC')::date and (l.at at time zone 'UTC')::date + 1
                          and u.calls > u.errors
       where l.at >= (select day from since)::timestamp at time zone 'UTC'
    )
    select api_id, count(*) filter (where source = 'used')::int as used, count(*) filter (where source = 'followed')::int as followed
      from (select api_id, 'used' as source from used union all select api_id, 'followed' from followed) s
     group by api_id`;
  return new Map(rows.map((r) => [r.api_id, { used: r.used, followed: r.followed }]));
}

/** Deletes up to `batch` listings made before `before`; returns how many. */
export async function pruneDiscoveryListings(db: Db, before: Date, batch: number): Promise<number> {
  const deleted = await db`
    delete from discovery_listings where ctid = any(array(
      select ctid from discovery_listings where at < ${before} order by at limit ${batch}))`;
  return deleted.count;
}
