-- Identity: dashboard sessions. A session cookie carries a JWT whose `jti` is a row here; the row is
-- the server-side half that lets logout (and an operator) make a token unusable before it expires.

create table dashboard_sessions (
  id          text primary key,
  account_id  uuid not null references accounts (id) on delete cascade,
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null,
  revoked_at  timestamptz
);
create index dashboard_sessions_account_idx on dashboard_sessions (account_id, created_at);
create index dashboard_sessions_expires_idx on dashboard_sessions (expires_at);

-- Key listings page by (created_at, id) within one account and kind.
create index api_keys_account_listing_idx on api_keys (account_id, kind, created_at, id);
