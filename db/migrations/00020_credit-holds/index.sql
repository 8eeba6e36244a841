-- Credit reservation (docs/decisions/credit-reservation.md): an edge holds a
-- slice of a busy account's balance in one atomic statement, charges calls from it in memory, and
-- writes their ledger rows in batches. balance_micros stays the sum of the ledger's entries;
-- held_micros is the part of it that edges hold. What a caller can still spend is
-- balance_micros - held_micros, and no statement lets that go below zero.
alter table accounts add column held_micros bigint not null default 0 check (held_micros >= 0);

create table credit_holds (
  id               uuid primary key default gen_random_uuid(),
  account_id       uuid not null references accounts (id) on delete cascade,
  -- The edge process that holds it (host, pid and start time): only that edge charges from it.
  edge_id          text not null,
  -- Running totals, so a settlement retried after an unknown commit changes nothing twice:
  -- reserved is every grant, charged the ledger rows written under the hold, released what went back.
  reserved_micros  bigint not null check (reserved_micros >= 0),
  charged_micros   bigint not null default 0 check (charged_micros >= 0),
  released_micros  bigint not null default 0 check (released_micros >= 0),
  created_at       timestamptz not null default now(),
  -- Pushed forward by every settlement of the live edge; past it (and a grace period) the hold is
  -- settled from the edge's usage events and the rest returned (settleExpiredHolds).
  expires_at       timestamptz not null,
  closed_at        timestamptz,
  check (charged_micros + released_micros <= reserved_micros),
  -- A closed hold holds nothing.
  check (closed_at is null or charged_micros + released_micros = reserved_micros)
);
create index credit_holds_open_idx on credit_holds (expires_at) where closed_at is null;
create index credit_holds_account_idx on credit_holds (account_id) where closed_at is null;

-- A charge made from a hold names it; its row is written when the edge settles (or by the recovery
-- of a dead edge's hold), with the id the edge gave the call.
alter table ledger_entries add column hold_id uuid references credit_holds (id);
-- The usage event of a call charged from a hold names the hold, so a dead edge's calls can be charged.
alter table usage_events add column hold_id uuid;
create index usage_events_hold_idx on usage_events (hold_id) where hold_id is not null;
