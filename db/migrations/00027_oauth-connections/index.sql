-- Managed OAuth 2 connections, "can I call this?" and connect requests (see docs/decisions/oauth-*.md).

-- Each API's OAuth 2 description as imported: {"flows": {"authorizationCode": {"authorizationUrl",
-- "tokenUrl", "refreshUrl"}, "clientCredentials": {"tokenUrl"}, "implicit": {"authorizationUrl"}},
-- "scopes": {"name": "description"}}; null when the API declares no OAuth 2 scheme.
alter table apis add column oauth jsonb;
-- Who issues the tokens: the authorization server's host (accounts.google.com,
-- login.microsoftonline.com). One OAuth app registered for a provider serves every API it issues for.
alter table apis add column oauth_provider text;
create index apis_oauth_provider_idx on apis (oauth_provider) where oauth_provider is not null;
-- Where a caller gets their own key for an API (needs_key): a documentation link from its description.
alter table apis add column key_docs_url text;

-- OAuth client registrations: the operator's (account_id null, one per provider) and an account's own
-- (bring your own app, one per account and provider). The secret is sealed under the connections
-- master key; a public client (PKCE only) has none.
create table oauth_apps (
  id                       uuid primary key default gen_random_uuid(),
  provider                 text not null,
  account_id               uuid references accounts (id) on delete cascade,
  client_id                text not null,
  client_secret_encrypted  bytea,
  authorization_url        text not null,
  token_url                text not null,
  revocation_url           text,
  created_at               timestamptz not null default now(),
  updated_at               timestamptz not null default now()
);
create unique index oauth_apps_operator_key on oauth_apps (provider) where account_id is null;
create unique index oauth_apps_account_key on oauth_apps (account_id, provider) where account_id is not null;

-- An account's OAuth grant for a provider. Several per provider, told apart by label; one is the
-- default. Tokens are sealed under the connections master key, bound to the connection's id.
create table oauth_connections (
  id                        uuid primary key default gen_random_uuid(),
  account_id                uuid not null references accounts (id) on delete cascade,
  provider                  text not null,
  label                     text not null check (label ~ '^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$'),
  is_default                boolean not null default false,
  app_id                    uuid not null references oauth_apps (id) on delete restrict,
  grant_type                text not null check (grant_type in ('authorization_code', 'client_credentials')),
  scopes                    text[] not null default '{}',
  access_token_encrypted    bytea not null,
  refresh_token_encrypted   bytea,
  expires_at                timestamptz,
  status                    text not null default 'ready' check (status in ('ready', 'needs_reauth')),
  -- Why the connection needs a person again (shown to them; never a token or a provider's raw body).
  status_reason             text,
  refreshed_at              timestamptz,
  refresh_failures          integer not null default 0,
  created_by_person_id      text references people (id) on delete set null,
  created_at                timestamptz not null default now(),
  updated_at                timestamptz not null default now(),
  unique (account_id, provider, label)
);
create unique index oauth_connections_default_key on oauth_connections (account_id, provider) where is_default;
create index oauth_connections_refresh_idx on oauth_connections (expires_at)
  where status = 'ready' and refresh_token_encrypted is not null;

-- A consent flow under way: the state sent to the provider (stored hashed), bound to the dashboard
-- session that started it, with the PKCE verifier sealed. Used once; expires after minutes.
create table oauth_authorizations (
  state_hash               text primary key,
  account_id               uuid not null references accounts (id) on delete cascade,
  session_hash             text not null,
  person_id                text references people (id) on delete set null,
  provider                 text not null,
  api_id                   text references apis (id) on delete set null,
  app_id                   uuid not null references oauth_apps (id) on delete cascade,
  label                    text not null,
  -- The connection being re-authorised or widened (incremental consent), else null for a new one.
  connection_id            uuid references oauth_connections (id) on delete cascade,
  scopes                   text[] not null,
  code_verifier_encrypted  bytea not null,
  connect_request_id       uuid,
  return_to                text,
  created_at               timestamptz not null default now(),
  expires_at               timestamptz not null
);
create index oauth_authorizations_expires_idx on oauth_authorizations (expires_at);

-- An agent asking a person to connect an API: what it wants to do and why, and how it ended.
create table connect_requests (
  id                    uuid primary key default gen_random_uuid(),
  account_id            uuid not null references accounts (id) on delete cascade,
  api_id                text not null references apis (id) on delete cascade,
  requested_by_key_id   text,
  purpose               text not null,
  scopes                text[] not null default '{}',
  status                text not null default 'pending'
                        check (status in ('pending', 'connected', 'declined', 'cancelled', 'expired')),
  -- The connection that answered it: an OAuth connection's id, or null for a stored key.
  oauth_connection_id   uuid references oauth_connections (id) on delete set null,
  resolved_by_person_id text references people (id) on delete set null,
  created_at            timestamptz not null default now(),
  expires_at            timestamptz not null,
  resolved_at           timestamptz
);
create index connect_requests_account_idx on connect_requests (account_id, status, created_at);
