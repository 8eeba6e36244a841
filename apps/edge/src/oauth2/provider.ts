import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { errors, Provider, type Adapter, type AdapterPayload } from 'oidc-provider';
import { isPrivateAddress } from '#core/gateway';
import { assertKeyUsable, type KeyRow } from '#core/identity';
import { oauthProviderSecretContext } from '#core/oauth';
import { openSecret, PlatformError, sealSecret } from '#core/platform';
import { findKeyByOAuthGrant } from '#db/keys';
import {
  consumeProviderModel,
  destroyProviderModel,
  findProviderModel,
  findProviderModelByUid,
  findProviderModelByUserCode,
  providerSecret,
  revokeProviderGrant,
  upsertProviderModel,
} from '#db/oauth-provider';
import type { Sql } from '#db/sql';
import type { EdgeSettings } from '../config.js';

/** Where the authorization server is mounted: its issuer is PUBLIC_URL + this path. */
export const OAUTH2_PREFIX = '/oauth2';
/** Dynamic Client Registration (RFC 7591), under the issuer: PUBLIC_URL/oauth2/register. */
export const REGISTRATION_PATH = '/register';
/** The one scope of the MCP resource: what a consent grants (the limits are the grant's key's). */
export const MCP_SCOPE = 'mcp';
const PROVIDER_SCOPES = ['openid', 'offline_access', MCP_SCOPE];
/** The dashboard page the provider sends a person to for sign-in and consent. */
export const CONSENT_PAGE = '/oauth/consent';
/** Access tokens are short-lived (an hour); refresh tokens keep a client connected for 30 days of disuse. */
const ACCESS_TOKEN_TTL_S = 3600;
const REFRESH_TOKEN_TTL_S = 30 * 24 * 3600;
const GRANT_TTL_S = 365 * 24 * 3600;
/** How long a person has to consent once the client sent them (the dashboard may ask them to sign in first). */
const INTERACTION_TTL_S = 15 * 60;

export interface AuthorizationServerUrls {
  /** The issuer (RFC 8414 `issuer`): PUBLIC_URL/oauth2. */
  issuer: string;
  /** The protected resource its tokens are for (RFC 8707): PUBLIC_URL/mcp. */
  resource: string;
  /** The dashboard's consent page. */
  consentPage: string;
}

export function authorizationServerUrls(settings: Pick<EdgeSettings, 'PUBLIC_URL'>): AuthorizationServerUrls {
  const site = settings.PUBLIC_URL.replace(/\/+$/, '');
  return { issuer: `${site}${OAUTH2_PREFIX}`, resource: `${site}/mcp`, consentPage: `${site}${CONSENT_PAGE}` };
}

/** An RS256 signing key (ID tokens, signed responses) as a private JWK. */
function newSigningJwk(): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), use: 'sig', alg: 'RS256' };
}

/** The provider's signing keys and cookie keys: made on first start, sealed under the master key. */
async function providerSecrets(sql: Sql, masterKey: Buffer): Promise<{ jwks: { keys: Record<string, unknown>[] }; cookieKeys: string[] }> {
  const open = async (name: string, make: () => string) => {
    const context = oauthProviderSecretContext(name);
    const sealed = await providerSecret(sql, name, () => sealSecret(masterKey, make(), context));
    return openSecret(masterKey, sealed, context);
  };
  const jwks = JSON.parse(await open('jwks', () => JSON.stringify({ keys: [newSigningJwk()] }))) as { keys: Record<string, unknown>[] };
  const cookieKeys = JSON.parse(await open('cookie-keys', () => JSON.stringify([randomBytes(32).toString('base64url')]))) as string[];
  return { jwks, cookieKeys };
}

/**
 * The models whose id is the credential itself (an opaque token's value is its id): stored under a
 * SHA-256 of it and without the `jti` copy, so a read of the table (a backup, a support query) holds
 * no usable token. A lookup hashes what it is given, as API keys are looked up.
 */
const CREDENTIAL_KINDS = new Set([
  'AccessToken',
  'RefreshToken',
  'AuthorizationCode',
  'ClientCredentials',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'RegistrationAccessToken',
  'InitialAccessToken',
]);

/** The id a model is stored under: a credential's SHA-256 (hex, prefixed), any other model's own id. */
export function storedModelId(kind: string, id: string): string {
  return CREDENTIAL_KINDS.has(kind) ? `sha256:${createHash('sha256').update(id).digest('hex')}` : id;
}

/** oidc-provider's storage: every model in Postgres (db/src/oauth-provider.ts), never in memory. */
function postgresAdapter(sql: Sql) {
  return class PostgresAdapter implements Adapter {
    private readonly credential: boolean;
    constructor(private readonly kind: string) {
      this.credential = CREDENTIAL_KINDS.has(kind);
    }
    upsert(id: string, payload: AdapterPayload, expiresIn: number | undefined) {
      const stored = this.credential ? { ...payload, jti: undefined } : payload;
      return upsertProviderModel(sql, this.kind, storedModelId(this.kind, id), stored, expiresIn);
    }
    async find(id: string) {
      const found = await findProviderModel(sql, this.kind, storedModelId(this.kind, id));
      return found && this.credential ? { ...found, jti: id } : found;
    }
    findByUid(uid: string) {
      return findProviderModelByUid(sql, this.kind, uid);
    }
    findByUserCode(userCode: string) {
      return findProviderModelByUserCode(sql, this.kind, userCode);
    }
    consume(id: string) {
      return consumeProviderModel(sql, this.kind, storedModelId(this.kind, id));
    }
    destroy(id: string) {
      return destroyProviderModel(sql, this.kind, storedModelId(this.kind, id));
    }
    async revokeByGrantId(grantId: string) {
      await revokeProviderGrant(sql, grantId);
    }
  };
}

/**
 * A Client ID Metadata Document may be fetched only from a public address (unless private upstreams
 * are allowed, as in development and tests): the document's URL is the client's to choose, and the
 * fetch must not become a way to probe the platform's own network.
 */
async function publicHost(settings: EdgeSettings, clientId: string): Promise<boolean> {
  if (settings.ALLOW_PRIVATE_UPSTREAMS) return true;
  const host = new URL(clientId).hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true }).catch(() => [])).map((each) => each.address);
  return addresses.length > 0 && addresses.every((address) => !isPrivateAddress(address));
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** What the consent page shows of a pending authorization request. */
export interface PendingAuthorization {
  uid: string;
  client: {
    id: string;
    name: string | null;
    /** The host the browser goes back to (where the code is sent). */
    redirectHost: string;
    redirectUri: string;
    clientUri: string | null;
    /** How the client made itself known: a Client ID Metadata Document (its id is that URL) or Dynamic Client Registration. */
    registration: 'metadata_document' | 'dynamic';
  };
  scopes: string[];
  resource: string;
  expiresAt: Date;
}

export interface AuthorizationServer {
  provider: Provider;
  urls: AuthorizationServerUrls;
  /** A pending authorization request by its interaction id, or 404 when it expired or was answered. */
  pending(uid: string): Promise<PendingAuthorization>;
  /**
   * The person consents: a grant is made for the account, `makeKey` makes the agent key that stands
   * for it (a failure there forgets the grant), and the answer is where the browser goes next (back
   * through the provider, which sends it on to the client with a code).
   */
  approve(
    uid: string,
    accountId: string,
    makeKey: (grantId: string, pending: PendingAuthorization) => Promise<KeyRow>,
  ): Promise<{ redirectTo: string; key: KeyRow }>;
  /** The person refuses: the client gets `access_denied`. */
  deny(uid: string): Promise<{ redirectTo: string }>;
  /**
   * The agent key behind an access token presented to /mcp, after every check: the token is known,
   * unexpired and for the MCP resource, and its grant's key is usable. Throws the platform's 401/403.
   */
  keyForAccessToken(token: string): Promise<KeyRow>;
}

/**
 * The platform's OAuth 2.1 authorization server for MCP clients: oidc-provider with authorization
 * code + PKCE (S256) only, resource indicators binding every access token to PUBLIC_URL/mcp (opaque,
 * audience-restricted), open Dynamic Client Registration, Client ID Metadata Documents, refresh
 * tokens and revocation. Sign-in and consent are the dashboard's (CONSENT_PAGE and routes/consent.ts).
 */
export async function createAuthorizationServer(sql: Sql, settings: EdgeSettings): Promise<AuthorizationServer> {
  const urls = authorizationServerUrls(settings);
  const { jwks, cookieKeys } = await providerSecrets(sql, settings.CONNECTIONS_MASTER_KEY);
  const secure = urls.issuer.startsWith('https:');
  const provider = new Provider(urls.issuer, {
    adapter: postgresAdapter(sql),
    jwks,
    cookies: {
      keys: cookieKeys,
      long: { signed: true, secure, sameSite: 'lax' },
      short: { signed: true, secure, sameSite: 'lax' },
    },
    clients: [],
    scopes: PROVIDER_SCOPES,
    claims: { openid: ['sub'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    routes: { registration: REGISTRATION_PATH },
    features: {
      devInteractions: { enabled: false },
      userinfo: { enabled: false },
      // Open registration (RFC 7591), as the MCP specification expects of a server without CIMD clients.
      registration: { enabled: true },
      // A client revokes its own tokens only (RFC 7009).
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx: unknown, client: { clientId: string }, token: { clientId?: string }) => token.clientId === client.clientId,
      },
      clientIdMetadataDocument: {
        enabled: true,
        ack: 'draft-02',
        allowFetch: async (_ctx: unknown, clientId: string) => publicHost(settings, clientId),
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => urls.resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: unknown, indicator: string) => {
          if (indicator !== urls.resource) {
            throw new errors.InvalidTarget!(`this authorization server issues tokens for ${urls.resource} only`);
          }
          return { scope: MCP_SCOPE, audience: urls.resource, accessTokenTTL: ACCESS_TOKEN_TTL_S, accessTokenFormat: 'opaque' };
        },
      },
    },
    // Browser-based clients (public ones, with no secret) may call the token and revocation endpoints
    // from the origins of their own redirect URIs; confidential clients call them from servers.
    clientBasedCORS: (_ctx: unknown, origin: string, client: { clientAuthMethod: string; redirectUris: string[] }) =>
      origin !== 'null' && client.clientAuthMethod === 'none' && client.redirectUris.some((uri) => URL.parse(uri)?.origin === origin),
    // A refresh token for every client registered for the refresh_token grant (MCP clients are).
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(grant: string): boolean }) => client.grantTypeAllowed('refresh_token'),
    findAccount: async (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub }) }),
    interactions: {
      url: async (_ctx: unknown, interaction: { uid: string }) => `${urls.consentPage}?interaction=${encodeURIComponent(interaction.uid)}`,
    },
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      RefreshToken: REFRESH_TOKEN_TTL_S,
      Interaction: INTERACTION_TTL_S,
      Session: 24 * 3600,
      // A consent holds a year, or until its key's own expiry when sooner (approveAlone); then the client asks again.
      Grant: GRANT_TTL_S,
      ClientCredentials: ACCESS_TOKEN_TTL_S,
      IdToken: ACCESS_TOKEN_TTL_S,
    },
    // A refused authorization request shown to the person: what went wrong, never a token or a code.
    renderError: async (ctx: { type: string; body: string }, out: Record<string, string>) => {
      ctx.type = 'html';
      ctx.body =
        `<!doctype html><html><head><meta charset="utf-8"><title>Authorization refused</title></head><body>` +
        `<h1>The client's request could not be completed</h1><p><code>${escapeHtml(out.error ?? 'error')}</code>: ${escapeHtml(out.error_description ?? '')}</p>` +
        `<p>Go back to the application that sent you here and try connecting again.</p></body></html>`;
    },
  });

  async function keyForAccessToken(token: string): Promise<KeyRow> {
    const found = await provider.AccessToken.find(token);
    if (!found) {
      throw new PlatformError('invalid_token', 'Access token not recognised', {
        hint: 'It is not one this platform issued, or it was revoked; sign the MCP client in again (it gets a new token from the authorization server).',
      });
    }
    const key = found.grantId ? await findKeyByOAuthGrant(sql, found.grantId) : null;
    if (key) assertKeyUsable(key);
    if (!key || found.isExpired || !found.isValid) {
      throw new PlatformError('invalid_token', 'Access token has expired', {
        hint: 'Get a new one with the refresh token, or sign the MCP client in again.',
      });
    }
    const audience = Array.isArray(found.aud) ? found.aud : found.aud === undefined ? [] : [found.aud];
    if (!audience.includes(urls.resource)) {
      throw new PlatformError('invalid_token', 'Access token was not issued for this resource', {
        hint: `Ask the authorization server for a token with resource=${urls.resource} (RFC 8707).`,
      });
    }
    return key;
  }

  async function interactionOf(uid: string) {
    const interaction = await provider.Interaction.find(uid);
    if (!interaction || interaction.result !== undefined) {
      throw new PlatformError('not_found', 'This authorization request has expired or was already answered', {
        hint: 'Start again from the MCP client: it opens a new request (they last 15 minutes).',
      });
    }
    return interaction;
  }

  async function pending(uid: string): Promise<PendingAuthorization> {
    const interaction = await interactionOf(uid);
    const clientId = String(interaction.params.client_id ?? '');
    const client = await provider.Client.find(clientId);
    if (!client)
      throw new PlatformError('not_found', 'The client of this authorization request is no longer registered', {
        hint: 'Register the client again.',
      });
    const metadata = client.metadata();
    const redirectUri = String(interaction.params.redirect_uri ?? (metadata.redirect_uris as string[] | undefined)?.[0] ?? '');
    let redirectHost = '';
    try {
      redirectHost = new URL(redirectUri).host;
    } catch {
      redirectHost = redirectUri;
    }
    return {
      uid,
      client: {
        id: clientId,
        name: typeof metadata.client_name === 'string' ? metadata.client_name : null,
        redirectHost,
        redirectUri,
        clientUri: typeof metadata.client_uri === 'string' ? metadata.client_uri : null,
        registration: client.clientIdMetadataDocument === true ? 'metadata_document' : 'dynamic',
      },
      scopes: String(interaction.params.scope ?? '')
        .split(' ')
        .filter((scope) => scope !== ''),
      resource: urls.resource,
      expiresAt: new Date(interaction.exp * 1000),
    };
  }

  const secondsLeft = (exp: number) => Math.max(1, exp - Math.floor(Date.now() / 1000));

  /**
   * Runs an answer to one request alone (a transaction-scoped advisory lock on its id): two clicks,
   * or two tabs, answering at once make one grant and one key; the later one finds it answered (404).
   */
  const alone = <T>(uid: string, answer: () => Promise<T>): Promise<T> =>
    sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtextextended(${`mcp-consent:${uid}`}, 0))`;
      return answer();
    }) as Promise<T>;

  const approve = (uid: string, accountId: string, makeKey: (grantId: string, pending: PendingAuthorization) => Promise<KeyRow>) =>
    alone(uid, () => approveAlone(uid, accountId, makeKey));

  async function approveAlone(uid: string, accountId: string, makeKey: (grantId: string, pending: PendingAuthorization) => Promise<KeyRow>) {
    const request = await pending(uid);
    const grant = new provider.Grant({ accountId, clientId: request.client.id });
    // The scopes the provider knows (openid, offline_access for refresh tokens, mcp) as asked; the
    // resource's own scope whatever was asked: the access is the MCP endpoint's, limited by the key.
    const oidcScopes = request.scopes.filter((scope) => PROVIDER_SCOPES.includes(scope));
    if (oidcScopes.length > 0) grant.addOIDCScope(oidcScopes.join(' '));
    grant.addResourceScope(urls.resource, MCP_SCOPE);
    const grantId = await grant.save();
    let key: KeyRow;
    try {
      key = await makeKey(grantId, request);
    } catch (error) {
      await revokeProviderGrant(sql, grantId);
      throw error;
    }
    // A key with an expiry ends the grant with it: past it the token endpoint refreshes nothing (the
    // grant row is gone), as /mcp already refuses the expired key.
    if (key.expires_at !== null) {
      const left = Math.ceil((key.expires_at.getTime() - Date.now()) / 1000);
      if (left < GRANT_TTL_S) {
        // save() keeps the time left to `exp`: moving `exp` shortens the stored grant's life.
        grant.exp = Math.floor(Date.now() / 1000) + Math.max(1, left);
        await grant.save();
      }
    }
    const interaction = await interactionOf(uid);
    interaction.result = { login: { accountId, remember: false }, consent: { grantId } };
    await interaction.save(secondsLeft(interaction.exp));
    return { redirectTo: interaction.returnTo, key };
  }

  const deny = (uid: string) =>
    alone(uid, async () => {
      const interaction = await interactionOf(uid);
      interaction.result = { error: 'access_denied', error_description: 'The person refused the request' };
      await interaction.save(secondsLeft(interaction.exp));
      return { redirectTo: interaction.returnTo };
    });

  return { provider, urls, keyForAccessToken, pending, approve, deny };
}
