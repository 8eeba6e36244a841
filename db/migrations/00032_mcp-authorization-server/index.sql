-- The platform as the OAuth 2.1 authorization server of MCP clients (issue 31): `oidc-provider`'s
-- models (authorization codes, access and refresh tokens, grants, sessions, interactions, registered
-- clients) in one table, as its adapter interface expects: one row per model instance, its payload as
-- the provider wrote it. Access and refresh tokens are opaque: the row is the token's only record,
-- so deleting it revokes the token everywhere at once. Expired rows are removed by the retention job.
create table oauth_provider_models (
  kind         text not null,
  id           text not null,
  payload      jsonb not null,
  grant_id     text,
  user_code    text,
  uid          text,
  expires_at   timestamptz,
  consumed_at  timestamptz,
  primary key (kind, id)
);
create index oauth_provider_models_grant_idx on oauth_provider_models (grant_id) where grant_id is not null;
create index oauth_provider_models_uid_idx on oauth_provider_models (uid) where uid is not null;
create index oauth_provider_models_user_code_idx on oauth_provider_models (user_code) where user_code is not null;
create index oauth_provider_models_expires_idx on oauth_provider_models (expires_at) where expires_at is not null;

-- The provider's own secrets: its signing keys (a JWKS) and its cookie-signing keys, made on first
-- start and sealed under CONNECTIONS_MASTER_KEY (AES-256-GCM, bound to `name`), like every other secret.
create table oauth_provider_secrets (
  name        text primary key,
  sealed      bytea not null,
  created_at  timestamptz not null default now()
);

-- A person's consent to an MCP client is an agent key of the account (its spend limit, allow-list
-- and expiry are the limits chosen on the consent page) whose secret nobody ever sees: the client
-- presents access tokens of the grant instead. Revoking the key deletes the grant and its tokens.
alter table api_keys
  add column oauth_grant_id     text unique,
  add column oauth_client_id    text,
  add column oauth_client_name  text;
