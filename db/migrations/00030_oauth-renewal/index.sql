-- Renewing OAuth access tokens ahead of expiry by a queue job (see docs/decisions/oauth-token-renewal.md).

-- A renewal that could not reach the provider (network, 5xx, 429) is tried again by the job after
-- this time, backed off with jitter; refresh_failures counts the failures in a row. Null: no wait.
alter table oauth_connections add column refresh_retry_at timestamptz;

-- What the job looks for: ready connections it can renew without a person (a refresh token, or client
-- credentials asked for again) whose access token expires soon...
create index oauth_connections_renewal_idx on oauth_connections (expires_at)
  where status = 'ready' and (refresh_token_encrypted is not null or grant_type = 'client_credentials');
-- ...and those with a refresh token left unused for a day (providers expire refresh tokens left idle).
create index oauth_connections_idle_idx on oauth_connections (refreshed_at)
  where status = 'ready' and refresh_token_encrypted is not null;
-- The index of 00027 covered refresh tokens only; the renewal index above covers it.
drop index if exists oauth_connections_refresh_idx;
