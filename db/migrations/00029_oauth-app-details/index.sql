-- What an OAuth app registration needs beyond its endpoints (see docs/decisions/oauth-app-registration.md).

-- The authorization server's issuer identifier, checked against the `iss` parameter of authorization
-- responses (RFC 9207) where the server sends one. Null: the authorization URL's origin.
alter table oauth_apps add column issuer text;
-- Scopes asked for on every consent with this app whatever the API declares, e.g. Microsoft's
-- offline_access, without which no refresh token is issued.
alter table oauth_apps add column default_scopes text[] not null default '{}';
-- Extra authorization request parameters the provider needs, e.g. Google's
-- {"access_type": "offline", "prompt": "consent"} for a refresh token. Never state, PKCE or redirect_uri.
alter table oauth_apps add column authorization_params jsonb not null default '{}';
-- How the app authenticates at the token and revocation endpoints: HTTP Basic (RFC 6749 §2.3.1, which
-- every server must accept), the secret in the form body, or none (a public client, PKCE only).
alter table oauth_apps add column token_endpoint_auth_method text not null default 'client_secret_basic'
  check (token_endpoint_auth_method in ('client_secret_basic', 'client_secret_post', 'none'));
