/**
 * The first-run checklist's facts: the moments kept in account_first_use, and those read from the
 * account's own records (a key used, a paid call in the ledger, funds added).
 */
import type { Db } from './sql.js';

export type FirstUseMark = 'key_copied' | 'discovered' | 'dismissed' | 'completed';

export interface FirstUseRow {
  key_copied_at: Date | null;
  discovered_at: Date | null;
  dismissed_at: Date | null;
  completed_at: Date | null;
  /** An API or agent key of the account has authenticated a request. */
  key_used: boolean;
  /** The ledger holds a charge for a proxied call. */
  paid_call: boolean;
  /** The ledger holds a top-up (the sign-up credit is not one). */
  topped_up: boolean;
}

/** The checklist's facts; once it is completed, the ledger and keys are not read again (those facts read false). */
export async function readFirstUse(db: Db, accountId: string): Promise<FirstUseRow> {
  const [row] = await db<FirstUseRow[]>`
    with f as (select * from account_first_use where account_id = ${accountId}),
         settled as (select exists (select 1 from f where f.completed_at is not null) as yes)
    select f.key_copied_at, f.discovered_at, f.dismissed_at, f.completed_at,
           case when settled.yes then false else exists (select 1 from api_keys k where k.account_id = ${accountId} and k.last_used_at is not null) end as key_used,
           case when settled.yes then false else exists (select 1 from ledger_entries l where l.account_id = ${accountId} and l.kind = 'charge' and l.item = 'proxy') end as paid_call,
           case when settled.yes then false else exists (select 1 from ledger_entries l where l.account_id = ${accountId} and l.kind = 'topup') end as topped_up
    from settled left join f on true`;
  return row!;
}

/** Records a moment once: the first time stays. */
export async function markFirstUse(db: Db, accountId: string, mark: FirstUseMark): Promise<void> {
  const column = { key_copied: 'key_copied_at', discovered: 'discovered_at', dismissed: 'dismissed_at', completed: 'completed_at' }[mark];
  await db`
    insert into account_first_use (account_id, ${db(column)}) values (${accountId}, now())
    on conflict (account_id) do update set ${db(column)} = coalesce(account_first_use.${db(column)}, now())`;
}
