import { countAppConnections, deleteOAuthApp, listOAuthApps, upsertOAuthApp, type OAuthAppRow, type OAuthTokenAuthMethod } from '#db/oauth';
import type { Db } from '#db/sql';
import { PlatformError, sealSecret } from '#core/platform';
import { isLoopbackHost, type OAuthClients } from './client.js';
import { oauthClientSecretContext } from './secrets.js';

/**
 * OAuth app registrations: the operator's, one per provider, which makes every API that provider
 * issues tokens for connectable by every account; and an account's own ("bring your own app"), which
 * that account's consent flows use instead. The client secret is sealed under the connections
 * master key, bound to its owner and provider; nothing ever answers it back.
 */

/** An app as lists show it: never its secret, only whether it has one. */
export interface OAuthAppView {
  id: string;
  provider: string;
  owner: 'operator' | 'account';
  clientId: string;
  hasClientSecret: boolean;
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl: string | null;
  issuer: string;
  defaultScopes: string[];
  authorizationParams: Record<string, string>;
  tokenAuthMethod: OAuthTokenAuthMethod;
  createdAt: Date;
  updatedAt: Date;
}

export const oauthAppView = (app: OAuthAppRow): OAuthAppView => ({
  id: app.id,
  provider: app.provider,
  owner: app.accountId === null ? 'operator' : 'account',
  clientId: app.clientId,
  hasClientSecret: app.clientSecretSealed !== null,
  authorizationUrl: app.authorizationUrl,
  tokenUrl: app.tokenUrl,
  revocationUrl: app.revocationUrl,
  issuer: app.issuer ?? new URL(app.authorizationUrl).origin,
  defaultScopes: app.defaultScopes,
  authorizationParams: app.authorizationParams,
  tokenAuthMethod: app.tokenAuthMethod,
  createdAt: app.createdAt,
  updatedAt: app.updatedAt,
});

export interface OAuthAppRegistration {
  /** The authorization server's host (accounts.google.com), as `apis.oauth_provider` names it. */
  provider: string;
  clientId: string;
  /** Null for a public client (PKCE only). */
  clientSecret: string | null;
  /** Either the endpoints, or an issuer whose discovery document gives them. */
  authorizationUrl?: string;
  tokenUrl?: string;
  revocationUrl?: string | null;
  issuer?: string | null;
  defaultScopes?: string[];
  authorizationParams?: Record<string, string>;
  tokenAuthMethod?: OAuthTokenAuthMethod;
}

const invalid = (message: string, hint?: string) => new PlatformError('validation_failed', message, hint === undefined ? {} : { hint });

const PROVIDER_PATTERN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:\d{1,5})?$/;

/** A provider name: an authorization server's host, lowercase, with a port only when it has one (loopback in tests). */
export function normalizeProvider(value: string): string {
  const provider = value.trim().toLowerCase();
  if (provider.length > 253 || !PROVIDER_PATTERN.test(provider)) {
    throw invalid(`provider must be the authorization server's host, e.g. accounts.google.com; got "${value}"`);
  }
  return provider;
}

/** RFC 6749 §3.3 scope-token: printable ASCII without space, '"' or '\'. */
export const SCOPE_PATTERN = /^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/;

export function assertScopes(scopes: readonly string[], field: string): string[] {
  if (scopes.length > 100) throw invalid(`${field} may list at most 100 scopes`);
  for (const scope of scopes) if (!SCOPE_PATTERN.test(scope)) throw invalid(`${field}: "${scope}" is not a valid OAuth scope`);
  return [...new Set(scopes)];
}

/** Request parameters the platform sets itself on every authorization request; an app may not override them. */
const RESERVED_PARAMETERS = new Set([
  'client_id',
  'redirect_uri',
  'response_type',
  'response_mode',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'nonce',
  'request',
  'request_uri',
]);

function assertAuthorizationParams(params: Record<string, string>): Record<string, string> {
  const entries = Object.entries(params);
  if (entries.length > 20) throw invalid('authorizationParams may hold at most 20 parameters');
  for (const [name, value] of entries) {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw invalid(`authorizationParams: "${name}" is not a parameter name`);
    if (RESERVED_PARAMETERS.has(name)) throw invalid(`authorizationParams: "${name}" is set by the platform and cannot be overridden`);
    if (typeof value !== 'string' || value.length > 500) throw invalid(`authorizationParams.${name} must be a string of at most 500 characters`);
  }
  return Object.fromEntries(entries);
}

/** An endpoint URL: https, or plain http on a loopback host (usable only where ALLOW_PRIVATE_UPSTREAMS is on: tests). */
export function assertEndpoint(value: string, field: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`${field} must be an absolute https URL, got "${value}"`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    throw invalid(`${field} must use https`, 'Providers are reached over https only (plain http is accepted for loopback test providers).');
  }
  if (url.username || url.password || url.hash) throw invalid(`${field} may not carry credentials or a fragment`);
  return url.toString();
}

/**
 * Registers (or replaces) an owner's app for a provider: the operator's when `accountId` is null.
 * With `issuer` and no endpoints, the endpoints come from the issuer's discovery document.
 */
export async function registerOAuthApp(
  db: Db,
  clients: OAuthClients,
  masterKey: Buffer,
  owner: { accountId: string | null },
  input: OAuthAppRegistration,
): Promise<OAuthAppView> {
  const provider = normalizeProvider(input.provider);
  const clientId = input.clientId.trim();
  if (!/^[\x21-\x7e]{1,512}$/.test(clientId)) throw invalid('clientId must be 1 to 512 printable characters without spaces');
  if (input.clientSecret !== null && (input.clientSecret.length === 0 || input.clientSecret.length > 4096)) {
    throw invalid('clientSecret must be 1 to 4096 characters (or absent for a public client)');
  }
  let endpoints: { issuer: string | null; authorizationUrl: string; tokenUrl: string; revocationUrl: string | null };
  if (input.authorizationUrl && input.tokenUrl) {
    endpoints = {
      issuer: input.issuer ? assertEndpoint(input.issuer, 'issuer').replace(/\/$/, '') : null,
      authorizationUrl: assertEndpoint(input.authorizationUrl, 'authorizationUrl'),
      tokenUrl: assertEndpoint(input.tokenUrl, 'tokenUrl'),
      revocationUrl: input.revocationUrl ? assertEndpoint(input.revocationUrl, 'revocationUrl') : null,
    };
  } else if (input.issuer && !input.authorizationUrl && !input.tokenUrl) {
    let discovered;
    try {
      discovered = await clients.discover(assertEndpoint(input.issuer, 'issuer'));
    } catch (error) {
      if (error instanceof PlatformError) throw error;
      throw invalid(`The issuer ${input.issuer} has no usable discovery document`, 'Give the endpoints instead: authorizationUrl and tokenUrl.');
    }
    endpoints = {
      issuer: discovered.issuer,
      authorizationUrl: assertEndpoint(discovered.authorizationUrl, 'the discovered authorization endpoint'),
      tokenUrl: assertEndpoint(discovered.tokenUrl, 'the discovered token endpoint'),
      revocationUrl: input.revocationUrl
        ? assertEndpoint(input.revocationUrl, 'revocationUrl')
        : discovered.revocationUrl && assertEndpoint(discovered.revocationUrl, 'the discovered revocation endpoint'),
    };
  } else {
    throw invalid('Give both authorizationUrl and tokenUrl, or an issuer to discover them from');
  }
  const tokenAuthMethod = input.tokenAuthMethod ?? (input.clientSecret === null ? 'none' : 'client_secret_basic');
  if ((tokenAuthMethod === 'none') !== (input.clientSecret === null)) {
    throw invalid(
      tokenAuthMethod === 'none' ? 'A public client (tokenAuthMethod none) has no client secret' : 'This tokenAuthMethod needs a client secret',
    );
  }
  const row = await upsertOAuthApp(db, {
    provider,
    accountId: owner.accountId,
    clientId,
    clientSecretSealed:
      input.clientSecret === null ? null : sealSecret(masterKey, input.clientSecret, oauthClientSecretContext(owner.accountId, provider)),
    ...endpoints,
    defaultScopes: assertScopes(input.defaultScopes ?? [], 'defaultScopes'),
    authorizationParams: assertAuthorizationParams(input.authorizationParams ?? {}),
    tokenAuthMethod,
  });
  return oauthAppView(row);
}

export async function listOAuthAppViews(db: Db, owner: { accountId: string | null }): Promise<OAuthAppView[]> {
  return (await listOAuthApps(db, owner)).map(oauthAppView);
}

/** Removes an owner's app for a provider. Refused (409) while connections made with it exist; null when there is none. */
export async function removeOAuthApp(db: Db, owner: { accountId: string | null }, providerName: string): Promise<OAuthAppView | null> {
  const provider = normalizeProvider(providerName);
  const apps = await listOAuthApps(db, owner);
  const app = apps.find((a) => a.provider === provider);
  if (!app) return null;
  const used = await countAppConnections(db, app.id);
  if (used > 0) {
    throw new PlatformError('conflict', `The OAuth app for ${provider} is used by ${used} connection${used === 1 ? '' : 's'}`, {
      hint: 'Those connections must be disconnected first (or register a replacement app for the provider with the same command, which keeps them).',
    });
  }
  try {
    const removed = await deleteOAuthApp(db, { accountId: owner.accountId, provider });
    return removed ? oauthAppView(removed) : null;
  } catch (error) {
    // A connection made with it since it was counted (the foreign key restricts).
    if ((error as { code?: string }).code === '23503') throw new PlatformError('conflict', `The OAuth app for ${provider} is in use`);
    throw error;
  }
}
