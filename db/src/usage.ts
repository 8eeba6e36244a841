import { z } from 'zod';
import { apiId } from '#contracts/directory';
import type { Db, Sql } from './sql.js';

/** One metered call. `id` is made by the edge, so every later write of the same event is a no-op. */
export const usageEventSchema = z.object({
  id: z.string().uuid(),
  accountId: z.string().uuid(),
  keyId: z.string().nullable(),
  apiId,
  item: z.string().min(1).max(50),
  status: z.number().int().min(100).max(599),
  latencyMs: z.number().int().nonnegative(),
  bytesIn: z.number().int().nonnegative(),
  bytesOut: z.number().int().nonnegative(),
  /** Net cost in micro-dollars as a decimal string (JSON has no bigint): charge minus refund. */
  costMicros: z.string().regex(/^\d{1,18}$/),
  chargeId: z.string().uuid().nullable(),
  /** The credit hold the call was charged from (db/src/credit-holds.ts), if it was. */
  holdId: z.string().uuid().nullable().optional(),
  /** ISO timestamp of the call. */
  at: z.string().datetime({ offset: true }),
  // What the activity log shows of the call (migration 00028); absent in events from older edges.
  /** The proxied request's method. */
  method: z.string().min(1).max(16).nullable().optional(),
  /** The path under the API's base URL, never the query string (redacted before it is stored). */
  path: z.string().max(2_048).nullable().optional(),
  outcome: z.enum(['served', 'failed', 'refunded']).nullable().optional(),
  /** The platform's error code of a failed or refunded call. */
  errorCode: z.string().min(1).max(64).nullable().optional(),
  /** What the call was charged before any refund, in micro-dollars as a decimal string. */
  chargedMicros: z
    .string()
    .regex(/^\d{1,18}$/)
    .nullable()
    .optional(),
  paidWith: z.enum(['balance', 'x402']).nullable().optional(),
  /** The call's request id (its answer's X-Request-Id; for an MCP tool, the POST /mcp request's); absent from older edges. */
  requestId: z.string().min(1).max(128).nullable().optional(),
  /**
   * The W3C trace context of the call's usage span, on events of traced calls only: the usage worker
   * continues the call's trace from it (docs/OPERATIONS.md, "Tracing"). Never stored.
   */
  traceparent: z
    .string()
    .regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/)
    .optional(),
});
export type UsageEvent = z.output<typeof usageEventSchema>;

export const usageBatchSchema = z.object({ events: z.array(usageEventSchema).min(1).max(5_000) });

/**
 * Writes a batch of usage events and advances the daily aggregates, idempotently: in one
 * transaction the events are inserted with `on conflict do nothing`, and only the rows that were
 * actually new are added to `usage_daily`. A retried job, a batch written twice (queue and
 * fallback) or a worker killed mid-batch (the transaction rolls back) never counts an event twice.
 * Returns how many events were new.
 */
export async function recordUsageEvents(sql: Sql, events: UsageEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  // One array per column, unnested by Postgres: the statement's text and its 20 parameters are the
  // same for every batch, so it is prepared once per connection. (A VALUES list took 19 parameters per
  // event, up to 95,000 for a batch, and a new statement for every batch size: about 18 µs of the
  // worker's CPU per event against 12 µs this way, Postgres's own about 23 µs either way; 2026-11-29.)
  const column = <T>(value: (event: UsageEvent) => T): T[] => events.map(value);
  return sql.begin(async (tx): Promise<number> => {
    const inserted = await tx<{ n: string }[]>`
      with fresh as (
        insert into usage_events (id, account_id, key_id, api_id, item, status, latency_ms, bytes_in, bytes_out, cost_micros,
                                  charge_id, hold_id, at, method, path, outcome, error_code, charged_micros, paid_with, request_id)
        select * from unnest(
          ${column((e) => e.id)}::uuid[], ${column((e) => e.accountId)}::uuid[], ${column((e) => e.keyId)}::text[],
          ${column((e) => e.apiId)}::text[], ${column((e) => e.item)}::text[], ${column((e) => e.status)}::int[],
          ${column((e) => e.latencyMs)}::int[], ${column((e) => e.bytesIn)}::bigint[], ${column((e) => e.bytesOut)}::bigint[],
          ${column((e) => e.costMicros)}::bigint[], ${column((e) => e.chargeId)}::uuid[], ${column((e) => e.holdId ?? null)}::uuid[],
          ${column((e) => e.at)}::timestamptz[], ${column((e) => e.method ?? null)}::text[], ${column((e) => e.path ?? null)}::text[],
          ${column((e) => e.outcome ?? null)}::text[], ${column((e) => e.errorCode ?? null)}::text[],
          ${column((e) => e.chargedMicros ?? null)}::bigint[], ${column((e) => e.paidWith ?? null)}::text[],
          ${column((e) => e.requestId ?? null)}::text[])
        on conflict (id) do nothing
        returning account_id, api_id, (at at time zone 'UTC')::date as day, status, latency_ms, bytes_in, bytes_out, cost_micros
      ),
      grouped as (
        select account_id, api_id, day, count(*) as calls, count(*) filter (where status >= 400) as errors,
               sum(cost_micros) as cost_micros, sum(latency_ms) as latency_ms_total, sum(bytes_in) as bytes_in, sum(bytes_out) as bytes_out
          from fresh group by account_id, api_id, day
      ),
      upserted as (
        insert into usage_daily (account_id, api_id, day, calls, errors, cost_micros, latency_ms_total, bytes_in, bytes_out)
        select account_id, api_id, day, calls, errors, cost_micros, latency_ms_total, bytes_in, bytes_out from grouped
        order by account_id, day, api_id
        on conflict (account_id, day, api_id) do update set
          calls = usage_daily.calls + excluded.calls,
          errors = usage_daily.errors + excluded.errors,
          cost_micros = usage_daily.cost_micros + excluded.cost_micros,
          latency_ms_total = usage_daily.latency_ms_total + excluded.latency_ms_total,
          bytes_in = usage_daily.bytes_in + excluded.bytes_in,
          bytes_out = usage_daily.bytes_out + excluded.bytes_out
        returning 1
      )
      select (select count(*) from fresh)::text as n, (select count(*) from upserted) as _u`;
    return Number(inserted[0]?.n ?? 0);
  });
}

export interface UsageTotals {
  calls: number;
  costMicros: bigint;
  errors: number;
}

export interface UsageDay extends UsageTotals {
  date: string;
}

export interface UsageByApi extends UsageTotals {
  apiId: string;
}

interface DailyRow {
  day: string;
  api_id: string;
  calls: bigint;
  errors: bigint;
  cost_micros: bigint;
}

async function dailyRows(db: Db, accountId: string, days: number, apiId: string | null): Promise<DailyRow[]> {
  return db<DailyRow[]>`
    select to_char(day, 'YYYY-MM-DD') as day, api_id, calls, errors, cost_micros from usage_daily
     where account_id = ${accountId}
       and day > (now() at time zone 'UTC')::date - ${days}::int
       and (${apiId}::text is null or api_id = ${apiId})
     order by day, api_id`;
}

function sumRows(rows: DailyRow[]): UsageTotals {
  return rows.reduce(
    (t, r) => ({ calls: t.calls + Number(r.calls), errors: t.errors + Number(r.errors), costMicros: t.costMicros + r.cost_micros }),
    {
      calls: 0,
      errors: 0,
      costMicros: 0n,
    },
  );
}

function groupBy<K extends string>(rows: DailyRow[], key: (r: DailyRow) => K): Map<K, DailyRow[]> {
  const map = new Map<K, DailyRow[]>();
  for (const row of rows) map.set(key(row), [...(map.get(key(row)) ?? []), row]);
  return map;
}

/** Usage of the last `days` UTC days (today included), from the worker's daily aggregates. */
export async function usageSummary(db: Db, accountId: string, days: number) {
  const rows = await dailyRows(db, accountId, days, null);
  const byDay: UsageDay[] = [...groupBy(rows, (r) => r.day)].map(([date, rs]) => ({ date, ...sumRows(rs) }));
  const byApi: UsageByApi[] = [...groupBy(rows, (r) => r.api_id)]
    .map(([apiId, rs]) => ({ apiId, ...sumRows(rs) }))
    .sort((a, b) => b.calls - a.calls || a.apiId.localeCompare(b.apiId));
  return { totals: sumRows(rows), byDay, byApi };
}

export async function apiUsage(db: Db, accountId: string, apiId: string, days: number) {
  const rows = await dailyRows(db, accountId, days, apiId);
  const byDay: UsageDay[] = rows.map((r) => ({ date: r.day, ...sumRows([r]) }));
  return { totals: sumRows(rows), byDay };
}

/** Aggregate statistics of the last `days` days; latency percentiles come from the event rows. */
export async function usageStats(db: Db, accountId: string, days: number) {
  const [daily] = await db<{ calls: bigint | null; errors: bigint | null; cost: bigint | null; latency: bigint | null }[]>`
    select sum(calls)::bigint as calls, sum(errors)::bigint as errors, sum(cost_micros)::bigint as cost, sum(latency_ms_total)::bigint as latency
      from usage_daily where account_id = ${accountId} and day > (now() at time zone 'UTC')::date - ${days}::int`;
  const [p95] = await db<{ p95: number | null }[]>`
    select percentile_cont(0.95) within group (order by latency_ms) as p95
      from usage_events where account_id = ${accountId} and at >= ((now() at time zone 'UTC')::date - ${days - 1}::int)::timestamp at time zone 'UTC'`;
  const top = await db<{ api_id: string; calls: bigint; cost: bigint }[]>`
    select api_id, sum(calls)::bigint as calls, sum(cost_micros)::bigint as cost
      from usage_daily where account_id = ${accountId} and day > (now() at time zone 'UTC')::date - ${days}::int
     group by api_id order by sum(calls) desc, api_id limit 5`;
  const calls = Number(daily?.calls ?? 0n);
  const errors = Number(daily?.errors ?? 0n);
  return {
    totalCalls: calls,
    totalCostMicros: daily?.cost ?? 0n,
    errorRate: calls === 0 ? 0 : Math.round((errors / calls) * 10_000) / 10_000,
    avgLatencyMs: calls === 0 ? 0 : Math.round(Number(daily?.latency ?? 0n) / calls),
    p95LatencyMs: p95?.p95 === null || p95?.p95 === undefined ? 0 : Math.round(Number(p95.p95)),
    topApis: top.map((t) => ({ apiId: t.api_id, calls: Number(t.calls), costMicros: t.cost })),
  };
}
