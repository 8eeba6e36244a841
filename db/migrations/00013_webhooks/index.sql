-- Outgoing webhooks (issue 16): endpoints an account registers, the events it is sent (Standard
-- Webhooks payloads, one row per event) and one delivery per event and endpoint, with its attempts.
create table webhook_endpoints (
  id                        text primary key,
  account_id                uuid not null references accounts (id) on delete cascade,
  url                       text not null,
  description               text not null default '',
  event_types               text[] not null,
  -- The signing secret (whsec_...), sealed with CONNECTIONS_MASTER_KEY; after a rotation the
  -- previous one keeps signing beside it until previous_expires_at, as Standard Webhooks allows.
  secret_sealed             bytea not null,
  previous_secret_sealed    bytea,
  previous_expires_at       timestamptz,
  status                    text not null default 'enabled' check (status in ('enabled', 'disabled')),
  disabled_reason           text,
  last_success_at           timestamptz,
  created_at                timestamptz not null default now(),
  updated_at                timestamptz not null default now()
);
create index webhook_endpoints_account_idx on webhook_endpoints (account_id, created_at);

create table webhook_events (
  -- The Standard Webhooks message id (webhook-id header): receivers deduplicate by it.
  id          text primary key,
  account_id  uuid not null references accounts (id) on delete cascade,
  type        text not null,
  payload     jsonb not null,
  created_at  timestamptz not null default now()
);
create index webhook_events_account_idx on webhook_events (account_id, created_at);

create table webhook_deliveries (
  id               text primary key,
  event_id         text not null references webhook_events (id) on delete cascade,
  endpoint_id      text not null references webhook_endpoints (id) on delete cascade,
  status           text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempts         integer not null default 0,
  last_status_code integer,
  last_error       text,
  last_attempt_at  timestamptz,
  delivered_at     timestamptz,
  created_at       timestamptz not null default now(),
  unique (event_id, endpoint_id)
);
create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, created_at desc);
create index webhook_deliveries_pending_idx on webhook_deliveries (created_at) where status = 'pending';
