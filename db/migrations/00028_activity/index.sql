-- The activity log (GET /api/v1/activity, docs/decisions/activity-and-statement.md): what each
-- metered call was and how it ended, written with its usage event by the usage worker (never on the
-- proxy's response path). Older events have none of these (null): their outcome is read from the
-- ledger (a refund of their charge) and their status.
--   method, path   the proxied request's method and path under the API's base URL, redacted
--                  (never the query string; long opaque segments masked): see core billing's activity.ts
--   outcome        served (answered, kept its cost), failed (an error answer, kept its cost or cost
--                  nothing) or refunded (charged, then the charge returned)
--   error_code     the platform's error code of a refunded or failed call (upstream_error, ...)
--   charged_micros what the call was charged before any refund (cost_micros is net)
--   paid_with      balance or x402; null when the call cost nothing
alter table usage_events
  add column method text,
  add column path text,
  add column outcome text check (outcome in ('served', 'failed', 'refunded')),
  add column error_code text,
  add column charged_micros bigint check (charged_micros >= 0),
  add column paid_with text check (paid_with in ('balance', 'x402')),
  -- When the row was written (not when the call happened, which is `at`): the live tail of the
  -- activity follows it, since events reach the table out of order (batches from several edges).
  -- A stable default: existing rows get the migration's time without a table rewrite.
  add column recorded_at timestamptz not null default now();

-- The activity page: an account's events newest first (at, id), and the tail by write time.
create index usage_events_activity_idx on usage_events (account_id, at desc, id desc);
create index usage_events_recorded_idx on usage_events (account_id, recorded_at);
drop index usage_events_account_at_idx;

-- The statement (GET /api/v1/statement) reads an account's ledger for a period: found by time, in
-- posting order.
create index ledger_entries_account_created_idx on ledger_entries (account_id, created_at);
