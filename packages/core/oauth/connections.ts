import { randomUUID } from 'node:crypto';
import * as oidc from 'openid-client';
import {
  deleteOAuthConnection,
  findOAuthAppFor,
  getApiOAuthProfile,
  getOAuthApp,
  insertOAuthConnection,
  listOAuthConnections,
  renameOAuthConnection,
  setDefaultOAuthConnection,
  type OAuthConnectionRow,
  type OAuthConnectionStatus,
  type OAuthGrantType,
} from '#db/oauth';
import type { Db } from '#db/sql';
import { notFound, PlatformError } from '#core/platform';
import { assertScopes, normalizeProvider } from './apps.js';
import { providerFailure } from './client.js';
import type { OAuthDeps } from './deps.js';
import { openAccessToken, openRefreshToken, sealTokens } from './secrets.js';

/**
 * An account's OAuth connections: several per provider, told apart by label, one the default (the
 * account's first for a provider). Lists show labels, scopes, status and expiry, never a token.
 */

/** A connection as the account sees it. */
export interface OAuthConnectionView {
  id: string;
  provider: string;
  label: string;
  isDefault: boolean;
  status: OAuthConnectionStatus;
  /** Why it needs a person again (needs_reauth), in words fit to show them. */
  statusReason: string | null;
  grantType: OAuthGrantType;
  scopes: string[];
  /** When the access token expires (null: the provider gave no expiry). */
  expiresAt: Date | null;
  /** True when the platform can renew the access token without a person. */
  renewable: boolean;
  refreshedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const oauthConnectionView = (row: OAuthConnectionRow): OAuthConnectionView => ({
  id: row.id,
  provider: row.provider,
  label: row.label,
  isDefault: row.isDefault,
  status: row.status,
  statusReason: row.statusReason,
  grantType: row.grantType,
  scopes: row.scopes,
  expiresAt: row.expiresAt,
  renewable: row.refreshTokenSealed !== null || row.grantType === 'client_credentials',
  refreshedAt: row.refreshedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

/** A connection's label: what `X-Service-Connection` names it by (with its id). */
export const LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$/;

export function assertLabel(label: string): string {
  const trimmed = label.trim();
  if (!LABEL_PATTERN.test(trimmed)) {
    throw new PlatformError('validation_failed', `"${label}" is not a valid connection label`, {
      hint: 'A label is 1 to 64 letters, digits, spaces and . _ @ -, starting with a letter or digit (for example "work" or "alice@example.com").',
    });
  }
  return trimmed;
}

export const labelTaken = (provider: string, label: string) =>
  new PlatformError('conflict', `You already have a connection to ${provider} labelled "${label}"`, {
    hint: 'Pick another label, or re-authorise that connection (connectionId) to change its scopes.',
  });

/** A label for a new connection when the person gave none: "default" for the first, then "connection-2", ... */
export async function nextLabel(db: Db, accountId: string, provider: string): Promise<string> {
  const taken = new Set((await listOAuthConnections(db, accountId, provider)).map((c) => c.label));
  if (!taken.has('default')) return 'default';
  for (let n = taken.size + 1; ; n += 1) if (!taken.has(`connection-${n}`)) return `connection-${n}`;
}

export async function listOAuthConnectionViews(db: Db, accountId: string): Promise<OAuthConnectionView[]> {
  return (await listOAuthConnections(db, accountId)).map(oauthConnectionView);
}

const connectionNotFound = (id: string) => notFound(`OAuth connection ${id}`, 'GET /api/v1/me/connections lists your OAuth connections.');

/** Makes a connection its provider's default (the one a call without X-Service-Connection uses). */
export async function makeDefaultConnection(deps: OAuthDeps, accountId: string, id: string): Promise<OAuthConnectionView> {
  const row = await deps.sql.begin((tx) => setDefaultOAuthConnection(tx, accountId, id));
  if (!row) throw connectionNotFound(id);
  await deps.announce(accountId, row.provider);
  return oauthConnectionView(row);
}

export async function renameConnection(deps: OAuthDeps, accountId: string, id: string, label: string): Promise<OAuthConnectionView> {
  const wanted = assertLabel(label);
  const row = await renameOAuthConnection(deps.sql, accountId, id, wanted);
  if (row === 'taken') {
    const existing = (await listOAuthConnections(deps.sql, accountId)).find((c) => c.id === id);
    throw labelTaken(existing?.provider ?? 'this provider', wanted);
  }
  if (!row) throw connectionNotFound(id);
  await deps.announce(accountId, row.provider);
  return oauthConnectionView(row);
}

/** What became of the tokens at the provider when a connection was deleted. */
export type RevocationOutcome = 'revoked' | 'not_supported' | 'failed';

/**
 * Disconnects: deletes the connection (another becomes the default if it was), then asks the
 * provider to revoke its tokens (RFC 7009) where the app has a revocation endpoint: the refresh
 * token first (which ends the grant at most providers), then the access token. A provider that
 * cannot be reached does not keep the connection: it is gone from the platform either way.
 */
export async function disconnectOAuth(
  deps: OAuthDeps,
  accountId: string,
  id: string,
): Promise<{ connection: OAuthConnectionView; revocation: RevocationOutcome }> {
  const row = await deps.sql.begin((tx) => deleteOAuthConnection(tx, accountId, id));
  if (!row) throw connectionNotFound(id);
  await deps.announce(accountId, row.provider);
  return { connection: oauthConnectionView(row), revocation: await revokeTokens(deps, row) };
}

async function revokeTokens(deps: OAuthDeps, row: OAuthConnectionRow): Promise<RevocationOutcome> {
  const app = await getOAuthApp(deps.sql, row.appId);
  if (!app?.revocationUrl) return 'not_supported';
  const key = deps.settings.CONNECTIONS_MASTER_KEY;
  try {
    const configuration = deps.clients.configuration(app);
    if (row.refreshTokenSealed) {
      await oidc.tokenRevocation(configuration, openRefreshToken(key, row.id, row.refreshTokenSealed), { token_type_hint: 'refresh_token' });
    }
    await oidc.tokenRevocation(configuration, openAccessToken(key, row.id, row.accessTokenSealed), { token_type_hint: 'access_token' });
    return 'revoked';
  } catch (error) {
    const failure = providerFailure(error);
    deps.log.warn(
      { provider: row.provider, connectionId: row.id, failure: failure.kind, oauthError: failure.error },
      'token revocation at the provider failed',
    );
    return 'failed';
  }
}

/** Where a connection is for: a directory API (its provider) or a provider named directly. */
export interface ConnectionTarget {
  apiId?: string | undefined;
  provider?: string | undefined;
}

/** The provider a target names, and the scopes the API (or every API of the provider) declares. */
export async function resolveTarget(
  db: Db,
  target: ConnectionTarget,
): Promise<{ provider: string; apiId: string | null; declared: string[] | null; operation: string[] }> {
  if (target.apiId) {
    const profile = await getApiOAuthProfile(db, target.apiId);
    if (!profile) throw notFound(`API ${target.apiId}`, 'List APIs with GET /api/v1/apis.');
    if (!profile.provider) {
      throw new PlatformError('validation_failed', `${target.apiId} does not use OAuth 2`, {
        hint: `Connect your own key instead: POST /api/v1/connect/${target.apiId} {"apiKey": "..."}.`,
      });
    }
    if (target.provider && normalizeProvider(target.provider) !== profile.provider) {
      throw new PlatformError('validation_failed', `${target.apiId} takes tokens from ${profile.provider}, not ${target.provider}`);
    }
    return { provider: profile.provider, apiId: profile.apiId, declared: profile.scopes.map((s) => s.name), operation: profile.operationScopes };
  }
  if (target.provider) return { provider: normalizeProvider(target.provider), apiId: null, declared: null, operation: [] };
  throw new PlatformError('validation_failed', 'Name the API (apiId) or the provider to connect');
}

/** The requested scopes, each declared by the API (when one is named); the provider-level list is checked by the caller. */
export function checkScopes(requested: string[], declared: string[] | null, apiId: string | null): string[] {
  const scopes = assertScopes(requested, 'scopes');
  if (declared !== null) {
    const unknown = scopes.filter((s) => !declared.includes(s));
    if (unknown.length > 0) {
      throw new PlatformError('validation_failed', `${apiId} does not declare the scope${unknown.length === 1 ? '' : 's'} ${unknown.join(', ')}`, {
        hint: `GET /api/v1/apis/${apiId} lists the scopes it declares.`,
      });
    }
  }
  return scopes;
}

/**
 * Client credentials (server to server): the platform gets a token for the account's own app,
 * with no person at the provider, and renews it the same way when it expires. Only an account's own
 * app may be used: a token from the operator's app would act as the operator at the provider,
 * shared by every account.
 */
export async function connectClientCredentials(
  deps: OAuthDeps,
  input: ConnectionTarget & { accountId: string; personId: string | null; label?: string | undefined; scopes?: string[] | undefined },
): Promise<OAuthConnectionView> {
  const target = await resolveTarget(deps.sql, input);
  const scopes = checkScopes(input.scopes ?? [], target.declared, target.apiId);
  const app = await findOAuthAppFor(deps.sql, input.accountId, target.provider);
  if (!app || app.accountId === null) {
    throw new PlatformError('oauth_not_configured', `Client credentials need your own OAuth app for ${target.provider}`, {
      hint: `Register your app first: POST /api/v1/oauth/apps {"provider": "${target.provider}", "clientId": "...", "clientSecret": "...", ...}. The operator's app serves consent flows only.`,
    });
  }
  const label = input.label ? assertLabel(input.label) : await nextLabel(deps.sql, input.accountId, target.provider);
  let tokens: oidc.TokenEndpointResponse;
  try {
    tokens = await oidc.clientCredentialsGrant(deps.clients.configuration(app), scopes.length > 0 ? { scope: scopes.join(' ') } : {});
  } catch (error) {
    throw tokenRequestFailed(target.provider, error);
  }
  const id = randomUUID();
  const row = await insertOAuthConnection(deps.sql, {
    id,
    accountId: input.accountId,
    provider: target.provider,
    label,
    appId: app.id,
    grantType: 'client_credentials',
    scopes: grantedScopes(tokens, scopes),
    ...sealTokens(deps.settings.CONNECTIONS_MASTER_KEY, id, { accessToken: tokens.access_token, refreshToken: null }),
    expiresAt: expiryOf(tokens),
    createdByPersonId: input.personId,
  });
  if (!row) throw labelTaken(target.provider, label);
  await deps.announce(input.accountId, target.provider);
  return oauthConnectionView(row);
}

/** The scopes a token response granted: its `scope` when it says, else what was asked for (RFC 6749 §5.1). */
export const grantedScopes = (tokens: oidc.TokenEndpointResponse, requested: string[]) =>
  typeof tokens.scope === 'string' && tokens.scope.trim() !== '' ? [...new Set(tokens.scope.trim().split(/\s+/))] : requested;

export const expiryOf = (tokens: oidc.TokenEndpointResponse) =>
  typeof tokens.expires_in === 'number' && Number.isFinite(tokens.expires_in) ? new Date(Date.now() + tokens.expires_in * 1000) : null;

/** A provider's refusal or silence at its token endpoint, as the caller's answer (its error code only, never its prose). */
export function tokenRequestFailed(provider: string, error: unknown): PlatformError {
  if (error instanceof PlatformError) return error;
  const failure = providerFailure(error);
  if (failure.kind === 'refused') {
    return new PlatformError('oauth_failed', `${provider} refused the token request${failure.error ? ` (${failure.error})` : ''}`, {
      hint: 'Check the OAuth app registered for this provider (client id, secret, endpoints, allowed grants and scopes).',
    });
  }
  return new PlatformError('upstream_unavailable', `${provider} could not be reached for a token`, {
    hint: 'Retry in a moment.',
    headers: { 'Retry-After': '30' },
  });
}
