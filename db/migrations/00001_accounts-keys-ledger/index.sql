-- Accounts, API keys (programmatic and agent keys) and the prepaid ledger.
-- Money is integer micro-dollars (1 dollar = 1,000,000) in bigint columns; never a float.

create extension if not exists pgcrypto;
create extension if not exists pg_trgm;
create extension if not exists unaccent;

create table accounts (
  id              uuid primary key default gen_random_uuid(),
  email           text not null,
  password_hash   text,
  -- The balance is a cache of sum(ledger_entries.amount_micros) kept in the same transaction as
  -- every ledger insert; the check constraint is the last line of defence against overdraft.
  balance_micros  bigint not null default 0 check (balance_micros >= 0),
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
create unique index accounts_email_lower_key on accounts (lower(email));

create table api_keys (
  id                 text primary key,
  account_id         uuid not null references accounts (id) on delete cascade,
  kind               text not null check (kind in ('api', 'agent')),
  name               text not null,
  prefix             text not null,
  key_hash           bytea not null unique,
  status             text not null default 'enabled' check (status in ('enabled', 'disabled', 'revoked')),
  -- Agent keys only: optional spending cap (micro-dollars), what has been spent against it,
  -- optional allow-list of directory API ids, optional expiry.
  spend_limit_micros bigint check (spend_limit_micros is null or spend_limit_micros >= 0),
  spent_micros       bigint not null default 0 check (spent_micros >= 0),
  allowed_apis       text[],
  expires_at         timestamptz,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  last_used_at       timestamptz,
  revoked_at         timestamptz
);
create index api_keys_account_idx on api_keys (account_id, kind, created_at);

create table ledger_entries (
  id                    uuid primary key default gen_random_uuid(),
  seq                   bigserial not null unique,
  account_id            uuid not null references accounts (id) on delete cascade,
  kind                  text not null check (kind in ('signup_credit', 'topup', 'charge', 'refund', 'adjustment')),
  -- Signed: credits are positive, charges negative.
  amount_micros         bigint not null,
  balance_after_micros  bigint not null check (balance_after_micros >= 0),
  key_id                text references api_keys (id) on delete set null,
  api_id                text,
  -- What was bought: 'proxy', 'instructions', 'cookbook', 'doc', ...
  item                  text,
  description           text,
  refund_of             uuid unique references ledger_entries (id),
  idempotency_key       text,
  created_at            timestamptz not null default now(),
  check ((kind = 'charge') = (amount_micros < 0) or amount_micros = 0),
  check ((kind = 'refund') = (refund_of is not null))
);
create index ledger_entries_account_idx on ledger_entries (account_id, seq);
create unique index ledger_entries_idempotency_key on ledger_entries (account_id, idempotency_key)
  where idempotency_key is not null;
