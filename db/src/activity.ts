import type { Db } from './sql.js';

/**
 * What an account sees of its money: the activity log (one row per metered call, from usage_events)
 * and the statement (every ledger movement, in posting order). Reads only; both are keyed by the
 * account, so one account never reads another's rows.
 */

export type ActivityOutcome = 'served' | 'failed' | 'refunded';

export interface ActivityFilter {
  apiId?: string | null;
  keyId?: string | null;
  outcome?: ActivityOutcome | null;
  /** Inclusive bounds on the answer's status (one status, or a class such as 500 to 599). */
  statusMin?: number | null;
  statusMax?: number | null;
  /** Inclusive lower bound on the call's time. */
  since?: Date | null;
  /** Exclusive upper bound on the call's time. */
  until?: Date | null;
  /** The call's request id (its answer's X-Request-Id). */
  requestId?: string | null;
}

/** Where a page of activity starts: strictly older than this (time as Postgres keeps it, microseconds). */
export interface ActivityPosition {
  at: string;
  id: string;
}

export interface ActivityRow {
  id: string;
  /** ISO time with microseconds (UTC), exact enough to page from. */
  at: string;
  api_id: string;
  item: string;
  method: string | null;
  path: string | null;
  status: number;
  latency_ms: number;
  bytes_in: bigint;
  bytes_out: bigint;
  cost_micros: bigint;
  charged_micros: bigint;
  charge_id: string | null;
  refund_id: string | null;
  refund_micros: bigint | null;
  outcome: ActivityOutcome;
  error_code: string | null;
  paid_with: 'balance' | 'x402' | null;
  request_id: string | null;
  key_id: string | null;
  key_kind: 'api' | 'agent' | null;
  key_name: string | null;
  key_prefix: string | null;
  recorded_at: string;
}

// Times are answered as ISO strings with microseconds (exact enough to page from). Events recorded
// before migration 00028 carry no outcome and no gross charge: both come from the ledger (the refund
// of their charge) and their status.

function activitySelect(db: Db) {
  return db`
    select u.id, to_char(u.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at, u.api_id, u.item, u.method, u.path, u.status, u.latency_ms,
           u.bytes_in, u.bytes_out, u.cost_micros,
           coalesce(u.charged_micros, u.cost_micros + coalesce(r.amount_micros, 0)) as charged_micros,
           u.charge_id, r.id as refund_id, r.amount_micros as refund_micros,
           coalesce(u.outcome, case when r.id is not null then 'refunded' when u.status >= 400 then 'failed' else 'served' end) as outcome, u.error_code, u.paid_with, u.request_id,
           u.key_id, k.kind as key_kind, k.name as key_name, k.prefix as key_prefix,
           to_char(u.recorded_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as recorded_at
      from usage_events u
      left join ledger_entries r on r.refund_of = u.charge_id
      left join api_keys k on k.id = u.key_id and k.account_id = u.account_id`;
}

/** One page of an account's activity, newest first; `limit + 1` rows are read so the caller knows whether more follow. */
export async function listActivity(
  db: Db,
  accountId: string,
  filter: ActivityFilter,
  after: ActivityPosition | null,
  limit: number,
): Promise<ActivityRow[]> {
  return db<ActivityRow[]>`
    ${activitySelect(db)}
     where u.account_id = ${accountId}
       ${filter.requestId ? db`and u.request_id = ${filter.requestId}` : db``}
       and (${filter.apiId ?? null}::text is null or u.api_id = ${filter.apiId ?? null})
       and (${filter.keyId ?? null}::text is null or u.key_id = ${filter.keyId ?? null})
       and (${filter.statusMin ?? null}::int is null or u.status >= ${filter.statusMin ?? null})
       and (${filter.statusMax ?? null}::int is null or u.status <= ${filter.statusMax ?? null})
       and (${filter.since ?? null}::timestamptz is null or u.at >= ${filter.since ?? null})
       and (${filter.until ?? null}::timestamptz is null or u.at < ${filter.until ?? null})
       and (${filter.outcome ?? null}::text is null or coalesce(u.outcome, case when r.id is not null then 'refunded' when u.status >= 400 then 'failed' else 'served' end) = ${filter.outcome ?? null})
       and (${after?.at ?? null}::timestamptz is null or (u.at, u.id) < (${after?.at ?? null}::timestamptz, ${after?.id ?? null}::uuid))
     order by u.at desc, u.id desc
     limit ${limit + 1}`;
}

/**
 * The account's events written after a position in write order (recorded_at, then id): the live
 * tail. Events reach the table out of order and a transaction's rows carry its start time, so the
 * tail asks again from a little before what it last saw and drops the ids it has already sent.
 */
export async function activityRecordedAfter(
  db: Db,
  accountId: string,
  after: { recordedAt: string; id: string },
  limit: number,
): Promise<ActivityRow[]> {
  return db<ActivityRow[]>`
    ${activitySelect(db)}
     where u.account_id = ${accountId} and (u.recorded_at, u.id) > (${after.recordedAt}::timestamptz, ${after.id}::uuid)
     order by u.recorded_at, u.id
     limit ${limit}`;
}

/**
 * How many of the account's events were written in (`from`, `to`]: by write time (exclusive) from
 * `from`, and up to the position `to` (write time and id) inclusive. The tail compares it with what
 * it has read to learn whether a batch committed late, without reading the rows again.
 */
export async function countActivityRecordedBetween(db: Db, accountId: string, from: string, to: { recordedAt: string; id: string }): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from usage_events u
     where u.account_id = ${accountId} and u.recorded_at > ${from}::timestamptz
       and (u.recorded_at, u.id) <= (${to.recordedAt}::timestamptz, ${to.id}::uuid)`;
  return row?.n ?? 0;
}

export type LedgerKind = 'signup_credit' | 'topup' | 'charge' | 'refund' | 'adjustment' | 'clawback' | 'x402_credit' | 'forfeit';

export interface StatementRow {
  id: string;
  seq: bigint;
  at: string;
  kind: LedgerKind;
  amount_micros: bigint;
  balance_after_micros: bigint;
  key_id: string | null;
  api_id: string | null;
  item: string | null;
  description: string | null;
  refund_of: string | null;
  hold_id: string | null;
}

export interface StatementPeriod {
  /** Inclusive. */
  from?: Date | null;
  /** Exclusive. */
  to?: Date | null;
}

/** Ledger entries of a period in posting order, after `afterSeq`; `limit + 1` rows are read. */
export async function statementEntries(
  db: Db,
  accountId: string,
  period: StatementPeriod,
  afterSeq: bigint | null,
  limit: number,
): Promise<StatementRow[]> {
  return db<StatementRow[]>`
    select id, seq, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at, kind, amount_micros, balance_after_micros,
           key_id, api_id, item, description, refund_of, hold_id
      from ledger_entries
     where account_id = ${accountId}
       and (${period.from ?? null}::timestamptz is null or created_at >= ${period.from ?? null})
       and (${period.to ?? null}::timestamptz is null or created_at < ${period.to ?? null})
       and (${afterSeq === null ? null : afterSeq.toString()}::bigint is null or seq > ${afterSeq === null ? null : afterSeq.toString()}::bigint)
     order by seq
     limit ${limit + 1}`;
}

export interface StatementTotals {
  entries: number;
  credits_micros: bigint;
  debits_micros: bigint;
  /** The balance before the period's first entry (in posting order), or null when the period has none. */
  opening_micros: bigint | null;
  /** The balance after its last entry, or null when the period has none. */
  closing_micros: bigint | null;
}

/** Totals of a period: what came in, what went out, and the balance before and after it. */
export async function statementTotals(db: Db, accountId: string, period: StatementPeriod): Promise<StatementTotals> {
  const [row] = await db<StatementTotals[]>`
    with period as (
      select seq, amount_micros, balance_after_micros from ledger_entries
       where account_id = ${accountId}
         and (${period.from ?? null}::timestamptz is null or created_at >= ${period.from ?? null})
         and (${period.to ?? null}::timestamptz is null or created_at < ${period.to ?? null})
    )
    select (select count(*)::int from period) as entries,
           (select coalesce(sum(amount_micros) filter (where amount_micros > 0), 0)::bigint from period) as credits_micros,
           (select coalesce(sum(amount_micros) filter (where amount_micros < 0), 0)::bigint from period) as debits_micros,
           (select balance_after_micros - amount_micros from period order by seq limit 1) as opening_micros,
           (select balance_after_micros from period order by seq desc limit 1) as closing_micros`;
  return row!;
}
