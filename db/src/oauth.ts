import type { Redis } from 'ioredis';
import type { Db } from './sql.js';

/**
 * OAuth 2 apps, connections and consent flows under way (migrations 00027, 00029 and 00030). Data access
 * only: sealing, token requests and the rules live in core's oauth context. Sealed columns are
 * returned as they are stored; nothing here ever sees a secret in the clear.
 */

// ---------------------------------------------------------------------------------------------
// Apps: the operator's (accountId null, one per provider) and an account's own (one per provider).

export interface OAuthAppRow {
  id: string;
  provider: string;
  /** Null for the operator's app. */
  accountId: string | null;
  clientId: string;
  /** Null for a public client (PKCE only). */
  clientSecretSealed: Buffer | null;
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl: string | null;
  issuer: string | null;
  defaultScopes: string[];
  authorizationParams: Record<string, string>;
  tokenAuthMethod: OAuthTokenAuthMethod;
  createdAt: Date;
  updatedAt: Date;
}

export type OAuthTokenAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

interface AppRecord {
  id: string;
  provider: string;
  account_id: string | null;
  client_id: string;
  client_secret_encrypted: Buffer | null;
  authorization_url: string;
  token_url: string;
  revocation_url: string | null;
  issuer: string | null;
  default_scopes: string[];
  authorization_params: Record<string, string> | null;
  token_endpoint_auth_method: OAuthTokenAuthMethod;
  created_at: Date;
  updated_at: Date;
}

const APP_COLUMNS =
  'id, provider, account_id, client_id, client_secret_encrypted, authorization_url, token_url, revocation_url, issuer, default_scopes, authorization_params, token_endpoint_auth_method, created_at, updated_at';

const toApp = (row: AppRecord): OAuthAppRow => ({
  id: row.id,
  provider: row.provider,
  accountId: row.account_id,
  clientId: row.client_id,
  clientSecretSealed: row.client_secret_encrypted,
  authorizationUrl: row.authorization_url,
  tokenUrl: row.token_url,
  revocationUrl: row.revocation_url,
  issuer: row.issuer,
  defaultScopes: row.default_scopes,
  authorizationParams: row.authorization_params ?? {},
  tokenAuthMethod: row.token_endpoint_auth_method,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export interface OAuthAppInput {
  provider: string;
  accountId: string | null;
  clientId: string;
  clientSecretSealed: Buffer | null;
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl: string | null;
  issuer: string | null;
  defaultScopes: string[];
  authorizationParams: Record<string, string>;
  tokenAuthMethod: OAuthTokenAuthMethod;
}

/** Registers the app of an owner (the operator, or an account) for a provider, replacing its earlier one in place (same id). */
export async function upsertOAuthApp(db: Db, input: OAuthAppInput): Promise<OAuthAppRow> {
  const params = db.json(input.authorizationParams);
  const insert = db`
    insert into oauth_apps (provider, account_id, client_id, client_secret_encrypted, authorization_url, token_url,
                            revocation_url, issuer, default_scopes, authorization_params, token_endpoint_auth_method)
    values (${input.provider}, ${input.accountId}, ${input.clientId}, ${input.clientSecretSealed}, ${input.authorizationUrl},
            ${input.tokenUrl}, ${input.revocationUrl}, ${input.issuer}, ${input.defaultScopes}, ${params}, ${input.tokenAuthMethod})`;
  // The two owners have separate partial unique indexes; the conflict target names the right one.
  const target = input.accountId === null ? db`(provider) where account_id is null` : db`(account_id, provider) where account_id is not null`;
  const [row] = await db<AppRecord[]>`
    ${insert}
    on conflict ${target} do update set
      client_id = excluded.client_id, client_secret_encrypted = excluded.client_secret_encrypted,
      authorization_url = excluded.authorization_url, token_url = excluded.token_url,
      revocation_url = excluded.revocation_url, issuer = excluded.issuer, default_scopes = excluded.default_scopes,
      authorization_params = excluded.authorization_params,
      token_endpoint_auth_method = excluded.token_endpoint_auth_method, updated_at = now()
    returning ${db.unsafe(APP_COLUMNS)}`;
  if (!row) throw new Error('upsert returned no row');
  return toApp(row);
}

/** The operator's apps (accountId null), or one account's own. */
export async function listOAuthApps(db: Db, owner: { accountId: string | null }): Promise<OAuthAppRow[]> {
  const rows =
    owner.accountId === null
      ? await db<AppRecord[]>`select ${db.unsafe(APP_COLUMNS)} from oauth_apps where account_id is null order by provider`
      : await db<AppRecord[]>`select ${db.unsafe(APP_COLUMNS)} from oauth_apps where account_id = ${owner.accountId} order by provider`;
  return rows.map(toApp);
}

export async function getOAuthApp(db: Db, id: string): Promise<OAuthAppRow | null> {
  const [row] = await db<AppRecord[]>`select ${db.unsafe(APP_COLUMNS)} from oauth_apps where id = ${id}`;
  return row ? toApp(row) : null;
}

/** The app a consent flow for this account and provider uses: the account's own before the operator's; null when neither exists. */
export async function findOAuthAppFor(db: Db, accountId: string, provider: string): Promise<OAuthAppRow | null> {
  const [row] = await db<AppRecord[]>`
    select ${db.unsafe(APP_COLUMNS)} from oauth_apps
     where provider = ${provider} and (account_id = ${accountId} or account_id is null)
     order by account_id nulls last limit 1`;
  return row ? toApp(row) : null;
}

/** The providers with an operator app: what makes an OAuth API connectable for every account. */
export async function operatorOAuthProviders(db: Db): Promise<string[]> {
  const rows = await db<{ provider: string }[]>`select provider from oauth_apps where account_id is null order by provider`;
  return rows.map((r) => r.provider);
}

/** How many connections were made with an app (an app in use cannot be removed). */
export async function countAppConnections(db: Db, appId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`select count(*)::int as n from oauth_connections where app_id = ${appId}`;
  return row?.n ?? 0;
}

/** Removes an owner's app for a provider; returns it, or null when there was none. Fails (23503) while connections use it. */
export async function deleteOAuthApp(db: Db, owner: { accountId: string | null; provider: string }): Promise<OAuthAppRow | null> {
  const [row] =
    owner.accountId === null
      ? await db<AppRecord[]>`delete from oauth_apps where provider = ${owner.provider} and account_id is null returning ${db.unsafe(APP_COLUMNS)}`
      : await db<
          AppRecord[]
        >`delete from oauth_apps where provider = ${owner.provider} and account_id = ${owner.accountId} returning ${db.unsafe(APP_COLUMNS)}`;
  return row ? toApp(row) : null;
}

/** Every app with a sealed client secret, locked, for the master-key rotation. */
export async function lockSealedAppSecrets(db: Db): Promise<Array<{ id: string; accountId: string | null; provider: string; sealed: Buffer }>> {
  const rows = await db<{ id: string; account_id: string | null; provider: string; client_secret_encrypted: Buffer }[]>`
    select id, account_id, provider, client_secret_encrypted from oauth_apps
     where client_secret_encrypted is not null order by id for update`;
  return rows.map((r) => ({ id: r.id, accountId: r.account_id, provider: r.provider, sealed: r.client_secret_encrypted }));
}

export async function setSealedAppSecret(db: Db, id: string, sealed: Buffer): Promise<void> {
  await db`update oauth_apps set client_secret_encrypted = ${sealed} where id = ${id}`;
}

// ---------------------------------------------------------------------------------------------
// Connections: an account's grants, several per provider told apart by label, one the default.

export type OAuthConnectionStatus = 'ready' | 'needs_reauth';
export type OAuthGrantType = 'authorization_code' | 'client_credentials';

/** A connection as stored, with its sealed tokens: for core only, never for an answer. */
export interface OAuthConnectionRow {
  id: string;
  accountId: string;
  provider: string;
  label: string;
  isDefault: boolean;
  appId: string;
  grantType: OAuthGrantType;
  scopes: string[];
  accessTokenSealed: Buffer;
  refreshTokenSealed: Buffer | null;
  expiresAt: Date | null;
  status: OAuthConnectionStatus;
  statusReason: string | null;
  refreshedAt: Date | null;
  /** Failed renewals in a row (the provider unreachable, or the refusal that marked it needs_reauth). */
  refreshFailures: number;
  /** When the renewal job may try again after the provider could not be reached; null: now. */
  refreshRetryAt: Date | null;
  createdByPersonId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

interface ConnectionRecord {
  id: string;
  account_id: string;
  provider: string;
  label: string;
  is_default: boolean;
  app_id: string;
  grant_type: OAuthGrantType;
  scopes: string[];
  access_token_encrypted: Buffer;
  refresh_token_encrypted: Buffer | null;
  expires_at: Date | null;
  status: OAuthConnectionStatus;
  status_reason: string | null;
  refreshed_at: Date | null;
  refresh_failures: number;
  refresh_retry_at: Date | null;
  created_by_person_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const CONNECTION_COLUMNS =
  'id, account_id, provider, label, is_default, app_id, grant_type, scopes, access_token_encrypted, refresh_token_encrypted, expires_at, status, status_reason, refreshed_at, refresh_failures, refresh_retry_at, created_by_person_id, created_at, updated_at';

const toConnection = (row: ConnectionRecord): OAuthConnectionRow => ({
  id: row.id,
  accountId: row.account_id,
  provider: row.provider,
  label: row.label,
  isDefault: row.is_default,
  appId: row.app_id,
  grantType: row.grant_type,
  scopes: row.scopes,
  accessTokenSealed: row.access_token_encrypted,
  refreshTokenSealed: row.refresh_token_encrypted,
  expiresAt: row.expires_at,
  status: row.status,
  statusReason: row.status_reason,
  refreshedAt: row.refreshed_at,
  refreshFailures: row.refresh_failures,
  refreshRetryAt: row.refresh_retry_at,
  createdByPersonId: row.created_by_person_id,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export interface NewOAuthConnection {
  /** Chosen by the caller: the sealed tokens are bound to it. */
  id: string;
  accountId: string;
  provider: string;
  label: string;
  appId: string;
  grantType: OAuthGrantType;
  scopes: string[];
  accessTokenSealed: Buffer;
  refreshTokenSealed: Buffer | null;
  expiresAt: Date | null;
  createdByPersonId: string | null;
}

/**
 * Stores a new connection; the account's first for the provider becomes its default. Returns null
 * when the label is taken for that provider (the unique constraint), so the caller can say so.
 */
export async function insertOAuthConnection(db: Db, input: NewOAuthConnection): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    insert into oauth_connections (id, account_id, provider, label, is_default, app_id, grant_type, scopes,
                                   access_token_encrypted, refresh_token_encrypted, expires_at, refreshed_at, created_by_person_id)
    values (${input.id}, ${input.accountId}, ${input.provider}, ${input.label},
            not exists (select 1 from oauth_connections where account_id = ${input.accountId} and provider = ${input.provider} and is_default),
            ${input.appId}, ${input.grantType}, ${input.scopes}, ${input.accessTokenSealed}, ${input.refreshTokenSealed},
            ${input.expiresAt}, now(), ${input.createdByPersonId})
    on conflict (account_id, provider, label) do nothing
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  return row ? toConnection(row) : null;
}

export interface OAuthTokenUpdate {
  accessTokenSealed: Buffer;
  /** Undefined keeps the stored refresh token (a provider that does not rotate it sends none). */
  refreshTokenSealed?: Buffer | null;
  expiresAt: Date | null;
  /** Undefined keeps the stored scopes. */
  scopes?: string[];
  /** A re-authorisation may move the connection to another app (the account brought its own since). */
  appId?: string;
}

/** New tokens for a connection (consent again, refresh): it is ready again and its failures are forgotten. */
export async function updateOAuthTokens(db: Db, id: string, update: OAuthTokenUpdate): Promise<OAuthConnectionRow | null> {
  const keepRefresh = update.refreshTokenSealed === undefined;
  const [row] = await db<ConnectionRecord[]>`
    update oauth_connections set
      access_token_encrypted = ${update.accessTokenSealed},
      refresh_token_encrypted = case when ${keepRefresh} then refresh_token_encrypted else ${update.refreshTokenSealed ?? null}::bytea end,
      expires_at = ${update.expiresAt},
      scopes = coalesce(${update.scopes ?? null}::text[], scopes),
      app_id = coalesce(${update.appId ?? null}::uuid, app_id),
      status = 'ready', status_reason = null, refresh_failures = 0, refresh_retry_at = null, refreshed_at = now(), updated_at = now()
    where id = ${id}
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  return row ? toConnection(row) : null;
}

/** Marks a connection as needing a person again (a refresh the provider refused), with a reason fit to show them. */
export async function markOAuthNeedsReauth(db: Db, id: string, reason: string): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    update oauth_connections set status = 'needs_reauth', status_reason = ${reason},
      refresh_failures = refresh_failures + 1, refresh_retry_at = null, updated_at = now()
    where id = ${id}
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  return row ? toConnection(row) : null;
}

/**
 * A renewal that could not reach the provider: one more failure in a row, and the time the renewal
 * job may try again. The connection stays ready (its refresh token may well still be good).
 */
export async function noteOAuthRenewalUnreachable(db: Db, id: string, retryAt: Date): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    update oauth_connections set refresh_failures = refresh_failures + 1, refresh_retry_at = ${retryAt}, updated_at = now()
    where id = ${id}
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  return row ? toConnection(row) : null;
}

/**
 * The ready connections the renewal job should renew now, soonest first, at most `limit`: those it
 * can renew without a person (a refresh token, or client credentials) whose access token expires
 * before `expiringBefore`, and those with a refresh token last renewed before `idleBefore` (null:
 * none for idleness). Connections waiting out a failure (refresh_retry_at) are left for later.
 */
export async function listOAuthConnectionsDue(
  db: Db,
  input: { expiringBefore: Date; idleBefore: Date | null; limit: number },
): Promise<Array<{ id: string; provider: string; expiresAt: Date | null; refreshedAt: Date | null }>> {
  const idle = input.idleBefore
    ? db`union all
         (select id, provider, expires_at, refreshed_at, refreshed_at as due from oauth_connections
           where status = 'ready' and refresh_token_encrypted is not null and refreshed_at < ${input.idleBefore}
             and (refresh_retry_at is null or refresh_retry_at <= now())
           order by refreshed_at limit ${input.limit})`
    : db``;
  const rows = await db<{ id: string; provider: string; expires_at: Date | null; refreshed_at: Date | null }[]>`
    select id, provider, expires_at, refreshed_at, min(due) as due from (
      (select id, provider, expires_at, refreshed_at, expires_at as due from oauth_connections
        where status = 'ready' and (refresh_token_encrypted is not null or grant_type = 'client_credentials')
          and expires_at < ${input.expiringBefore} and (refresh_retry_at is null or refresh_retry_at <= now())
        order by expires_at limit ${input.limit})
      ${idle}
    ) due
    group by id, provider, expires_at, refreshed_at
    order by due limit ${input.limit}`;
  return rows.map((r) => ({ id: r.id, provider: r.provider, expiresAt: r.expires_at, refreshedAt: r.refreshed_at }));
}

/** The account's connections, every provider or one, default first then by label. */
export async function listOAuthConnections(db: Db, accountId: string, provider?: string): Promise<OAuthConnectionRow[]> {
  const rows =
    provider === undefined
      ? await db<ConnectionRecord[]>`
          select ${db.unsafe(CONNECTION_COLUMNS)} from oauth_connections where account_id = ${accountId}
           order by provider, is_default desc, label`
      : await db<ConnectionRecord[]>`
          select ${db.unsafe(CONNECTION_COLUMNS)} from oauth_connections where account_id = ${accountId} and provider = ${provider}
           order by is_default desc, label`;
  return rows.map(toConnection);
}

export async function getOAuthConnection(db: Db, accountId: string, id: string): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    select ${db.unsafe(CONNECTION_COLUMNS)} from oauth_connections where id = ${id} and account_id = ${accountId}`;
  return row ? toConnection(row) : null;
}

/** Locks one connection for a token change (refresh, re-authorisation); null when it is gone. */
export async function lockOAuthConnection(db: Db, id: string): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    select ${db.unsafe(CONNECTION_COLUMNS)} from oauth_connections where id = ${id} for update`;
  return row ? toConnection(row) : null;
}

/** Makes one connection its provider's default for the account (and no other). Null when it does not exist. */
export async function setDefaultOAuthConnection(db: Db, accountId: string, id: string): Promise<OAuthConnectionRow | null> {
  const [target] = await db<{ provider: string }[]>`
    select provider from oauth_connections where id = ${id} and account_id = ${accountId} for update`;
  if (!target) return null;
  await db`
    update oauth_connections set is_default = false, updated_at = now()
     where account_id = ${accountId} and provider = ${target.provider} and is_default and id <> ${id}`;
  const [row] = await db<ConnectionRecord[]>`
    update oauth_connections set is_default = true, updated_at = now() where id = ${id}
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  return row ? toConnection(row) : null;
}

/** Renames a connection; null when it does not exist, 'taken' when the provider already has that label. */
export async function renameOAuthConnection(db: Db, accountId: string, id: string, label: string): Promise<OAuthConnectionRow | null | 'taken'> {
  try {
    const [row] = await db<ConnectionRecord[]>`
      update oauth_connections set label = ${label}, updated_at = now() where id = ${id} and account_id = ${accountId}
      returning ${db.unsafe(CONNECTION_COLUMNS)}`;
    return row ? toConnection(row) : null;
  } catch (error) {
    if ((error as { code?: string }).code === '23505') return 'taken';
    throw error;
  }
}

/**
 * Deletes a connection and returns it (with its sealed tokens, for revocation at the provider).
 * When it was the default, the provider's oldest remaining connection becomes the default.
 */
export async function deleteOAuthConnection(db: Db, accountId: string, id: string): Promise<OAuthConnectionRow | null> {
  const [row] = await db<ConnectionRecord[]>`
    delete from oauth_connections where id = ${id} and account_id = ${accountId}
    returning ${db.unsafe(CONNECTION_COLUMNS)}`;
  if (!row) return null;
  if (row.is_default) {
    await db`
      update oauth_connections set is_default = true, updated_at = now()
       where id = (select id from oauth_connections where account_id = ${accountId} and provider = ${row.provider}
                    order by created_at, id limit 1)`;
  }
  return toConnection(row);
}

/** Every connection's sealed tokens, locked, for the master-key rotation. */
export async function lockSealedConnectionTokens(db: Db): Promise<Array<{ id: string; access: Buffer; refresh: Buffer | null }>> {
  const rows = await db<{ id: string; access_token_encrypted: Buffer; refresh_token_encrypted: Buffer | null }[]>`
    select id, access_token_encrypted, refresh_token_encrypted from oauth_connections order by id for update`;
  return rows.map((r) => ({ id: r.id, access: r.access_token_encrypted, refresh: r.refresh_token_encrypted }));
}

export async function setSealedConnectionTokens(db: Db, id: string, access: Buffer, refresh: Buffer | null): Promise<void> {
  await db`update oauth_connections set access_token_encrypted = ${access}, refresh_token_encrypted = ${refresh} where id = ${id}`;
}

/** Channel on which a change to an account's OAuth connections is announced to every edge (which caches them for the proxy). */
export const oauthConnectionChangesChannel = (redisPrefix: string) => `${redisPrefix}:oauth-connection-changes`;

/** The message naming one account's connections to one provider. */
export const oauthConnectionChangeMessage = (accountId: string, provider: string) => `${accountId} ${provider}`;

export async function publishOAuthConnectionChange(redis: Redis, redisPrefix: string, accountId: string, provider: string): Promise<void> {
  await redis.publish(oauthConnectionChangesChannel(redisPrefix), oauthConnectionChangeMessage(accountId, provider));
}

// ---------------------------------------------------------------------------------------------
// Consent flows under way: one row per state, used once.

export interface OAuthAuthorizationRow {
  stateHash: string;
  accountId: string;
  sessionHash: string;
  personId: string | null;
  provider: string;
  apiId: string | null;
  appId: string;
  label: string;
  connectionId: string | null;
  scopes: string[];
  codeVerifierSealed: Buffer;
  connectRequestId: string | null;
  returnTo: string | null;
  createdAt: Date;
  expiresAt: Date;
}

interface AuthorizationRecord {
  state_hash: string;
  account_id: string;
  session_hash: string;
  person_id: string | null;
  provider: string;
  api_id: string | null;
  app_id: string;
  label: string;
  connection_id: string | null;
  scopes: string[];
  code_verifier_encrypted: Buffer;
  connect_request_id: string | null;
  return_to: string | null;
  created_at: Date;
  expires_at: Date;
}

const toAuthorization = (row: AuthorizationRecord): OAuthAuthorizationRow => ({
  stateHash: row.state_hash,
  accountId: row.account_id,
  sessionHash: row.session_hash,
  personId: row.person_id,
  provider: row.provider,
  apiId: row.api_id,
  appId: row.app_id,
  label: row.label,
  connectionId: row.connection_id,
  scopes: row.scopes,
  codeVerifierSealed: row.code_verifier_encrypted,
  connectRequestId: row.connect_request_id,
  returnTo: row.return_to,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
});

export type NewOAuthAuthorization = Omit<OAuthAuthorizationRow, 'createdAt'>;

/** Records a consent flow under way; sweeps a few long-expired ones on the way. */
export async function insertOAuthAuthorization(db: Db, input: NewOAuthAuthorization): Promise<void> {
  await db`delete from oauth_authorizations where state_hash in (
    select state_hash from oauth_authorizations where expires_at < now() - interval '1 hour' limit 100)`;
  await db`
    insert into oauth_authorizations (state_hash, account_id, session_hash, person_id, provider, api_id, app_id, label,
                                      connection_id, scopes, code_verifier_encrypted, connect_request_id, return_to, expires_at)
    values (${input.stateHash}, ${input.accountId}, ${input.sessionHash}, ${input.personId}, ${input.provider}, ${input.apiId},
            ${input.appId}, ${input.label}, ${input.connectionId}, ${input.scopes}, ${input.codeVerifierSealed},
            ${input.connectRequestId}, ${input.returnTo}, ${input.expiresAt})`;
}

/** Takes the flow with this state hash: deleted as it is read, so a state is used at most once (expired ones too). */
export async function takeOAuthAuthorization(db: Db, stateHash: string): Promise<OAuthAuthorizationRow | null> {
  const [row] = await db<AuthorizationRecord[]>`delete from oauth_authorizations where state_hash = ${stateHash} returning *`;
  return row ? toAuthorization(row) : null;
}

/** Flows under way with their sealed verifiers, locked, for the master-key rotation. */
export async function lockSealedVerifiers(db: Db): Promise<Array<{ stateHash: string; sealed: Buffer }>> {
  const rows = await db<{ state_hash: string; code_verifier_encrypted: Buffer }[]>`
    select state_hash, code_verifier_encrypted from oauth_authorizations order by state_hash for update`;
  return rows.map((r) => ({ stateHash: r.state_hash, sealed: r.code_verifier_encrypted }));
}

export async function setSealedVerifier(db: Db, stateHash: string, sealed: Buffer): Promise<void> {
  await db`update oauth_authorizations set code_verifier_encrypted = ${sealed} where state_hash = ${stateHash}`;
}

// ---------------------------------------------------------------------------------------------
// What the directory says of an API's OAuth 2 (filled by the import, migration 00027).

export interface ApiOAuthProfile {
  apiId: string;
  authType: string;
  /** The authorization server's host, or null when the API declares no OAuth 2. */
  provider: string | null;
  /** The scopes the API declares, with their descriptions. */
  scopes: Array<{ name: string; description: string }>;
  /** The scopes its operations declare needing (empty when they declare none). */
  operationScopes: string[];
  /** The flows the description declares (authorizationCode, clientCredentials, implicit). */
  flows: string[];
}

/** An API's OAuth 2 profile, or null when the API does not exist. Tolerates whatever shape the import left. */
export async function getApiOAuthProfile(db: Db, apiId: string): Promise<ApiOAuthProfile | null> {
  const [row] = await db<
    { id: string; auth_type: string | null; oauth_provider: string | null; scopes: unknown; operation_scopes: string[]; flows: string[] }[]
  >`
    select id, auth_scheme->>'type' as auth_type, oauth_provider,
           case when jsonb_typeof(oauth->'scopes') = 'object' then oauth->'scopes' else '{}'::jsonb end as scopes,
           coalesce((select array_agg(distinct s order by s)
                       from jsonb_array_elements(case when jsonb_typeof(endpoints) = 'array' then endpoints else '[]'::jsonb end) e,
                            jsonb_array_elements_text(case when jsonb_typeof(e->'scopes') = 'array' then e->'scopes' else '[]'::jsonb end) s),
                    '{}') as operation_scopes,
           coalesce((select array_agg(k order by k)
                       from jsonb_object_keys(case when jsonb_typeof(oauth->'flows') = 'object' then oauth->'flows' else '{}'::jsonb end) k),
                    '{}') as flows
      from apis where id = ${apiId}`;
  if (!row) return null;
  const scopes = Object.entries((row.scopes ?? {}) as Record<string, unknown>).map(([name, description]) => ({
    name,
    description: typeof description === 'string' ? description : '',
  }));
  return {
    apiId: row.id,
    authType: row.auth_type ?? 'none',
    provider: row.oauth_provider,
    scopes,
    operationScopes: row.operation_scopes,
    flows: row.flows,
  };
}

/** Every scope the APIs of a provider declare (a connection made for the provider rather than one API may ask for any of them). */
export async function providerDeclaredScopes(db: Db, provider: string): Promise<string[]> {
  const rows = await db<{ scope: string }[]>`
    select distinct k as scope
      from apis, jsonb_object_keys(case when jsonb_typeof(oauth->'scopes') = 'object' then oauth->'scopes' else '{}'::jsonb end) k
     where oauth_provider = ${provider}
     order by 1`;
  return rows.map((r) => r.scope);
}
