-- Money: bring-your-own-key connections and the usage pipeline's tables.
-- The ledger itself (accounts.balance_micros, ledger_entries) lives in 00001.

-- A caller's own key for a directory API, AES-256-GCM under CONNECTIONS_MASTER_KEY (see
-- db/src/secret-box.ts). Only the short hint is ever shown back.
create table connections (
  account_id     uuid not null references accounts (id) on delete cascade,
  api_id         text not null references apis (id) on delete cascade,
  key_encrypted  bytea not null,
  key_hint       text not null,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  primary key (account_id, api_id)
);

-- One row per metered call, written by the usage worker (or the edge's fallback when Redis is
-- away). The id is made by the edge, so a retried job or a replayed batch inserts nothing twice.
create table usage_events (
  id           uuid primary key,
  account_id   uuid not null references accounts (id) on delete cascade,
  key_id       text,
  api_id       text not null,
  item         text not null,
  status       integer not null,
  latency_ms   integer not null check (latency_ms >= 0),
  bytes_in     bigint not null default 0 check (bytes_in >= 0),
  bytes_out    bigint not null default 0 check (bytes_out >= 0),
  -- Net cost: the charge minus its refund, so the sum matches the ledger.
  cost_micros  bigint not null check (cost_micros >= 0),
  charge_id    uuid,
  at           timestamptz not null
);
create index usage_events_account_at_idx on usage_events (account_id, at);

-- Per account, API and UTC day; only ever advanced in the same transaction that inserted the
-- events it counts.
create table usage_daily (
  account_id        uuid not null references accounts (id) on delete cascade,
  api_id            text not null,
  day               date not null,
  calls             bigint not null default 0,
  errors            bigint not null default 0,
  cost_micros       bigint not null default 0,
  latency_ms_total  bigint not null default 0,
  bytes_in          bigint not null default 0,
  bytes_out         bigint not null default 0,
  primary key (account_id, day, api_id)
);
