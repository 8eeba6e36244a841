import * as oidc from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import type { OAuthAppRow } from '#db/oauth';
import { assertPublicHost, guardedLookup } from '#core/gateway';
import { openSecret, PlatformError } from '#core/platform';
import { oauthClientSecretContext } from './secrets.js';

/** What the OAuth client side needs of a process's settings (the edge's; the workers' for refresh). */
export interface OAuthSettings {
  CONNECTIONS_MASTER_KEY: Buffer;
  /** Tests only (refused in production): lets token requests reach loopback providers, over plain http too. */
  ALLOW_PRIVATE_UPSTREAMS: boolean;
}

/** How long one request to a provider's token or revocation endpoint may take. */
const PROVIDER_TIMEOUT_SECONDS = 10;

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** True for a host name that is this machine (plain http is accepted for it, and only it, in tests). */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * The platform's side of OAuth 2 with the providers: openid-client (v6) configurations built from
 * registered apps, making their requests through one undici Agent that refuses private addresses
 * (the proxy's SSRF guard: an account's own app names URLs of its choosing) unless
 * ALLOW_PRIVATE_UPSTREAMS. Plain http is allowed only to a loopback provider with that setting on,
 * which is how tests reach the loopback `oidc-provider`.
 */
export class OAuthClients {
  private readonly agent: Agent;
  private readonly configurations = new Map<string, { updatedAt: number; configuration: oidc.Configuration }>();
  private readonly fetch: oidc.CustomFetch;

  constructor(private readonly settings: OAuthSettings) {
    this.agent = new Agent({
      keepAliveTimeout: 5_000,
      connect: settings.ALLOW_PRIVATE_UPSTREAMS ? { timeout: 5_000 } : { timeout: 5_000, lookup: guardedLookup as never },
    });
    this.fetch = async (url, options) => {
      // An address written as an IP never reaches the connection's DNS lookup: check it here.
      if (!this.settings.ALLOW_PRIVATE_UPSTREAMS) await assertPublicHost(new URL(url).hostname);
      const response = await undiciFetch(url, { ...(options as object), dispatcher: this.agent });
      return response as unknown as Response;
    };
  }

  /** The openid-client configuration of an app (cached per app until the row changes). */
  configuration(app: OAuthAppRow): oidc.Configuration {
    const cached = this.configurations.get(app.id);
    if (cached && cached.updatedAt === app.updatedAt.getTime()) return cached.configuration;
    const endpoints = [app.authorizationUrl, app.tokenUrl, ...(app.revocationUrl ? [app.revocationUrl] : [])].map((u) => new URL(u));
    const insecure = endpoints.filter((u) => u.protocol === 'http:');
    if (insecure.length > 0 && !(this.settings.ALLOW_PRIVATE_UPSTREAMS && insecure.every((u) => isLoopbackHost(u.hostname)))) {
      throw new PlatformError('service_unavailable', `The OAuth app for ${app.provider} uses plain http, which the platform refuses`, {
        hint: 'Register the app again with https endpoints (npm run api -- oauth-app set ...).',
      });
    }
    const secret =
      app.clientSecretSealed === null
        ? null
        : openSecret(this.settings.CONNECTIONS_MASTER_KEY, app.clientSecretSealed, oauthClientSecretContext(app.accountId, app.provider));
    const metadata: oidc.ServerMetadata = {
      issuer: app.issuer ?? new URL(app.authorizationUrl).origin,
      authorization_endpoint: app.authorizationUrl,
      token_endpoint: app.tokenUrl,
      ...(app.revocationUrl ? { revocation_endpoint: app.revocationUrl } : {}),
    };
    const auth =
      secret === null || app.tokenAuthMethod === 'none'
        ? oidc.None()
        : app.tokenAuthMethod === 'client_secret_post'
          ? oidc.ClientSecretPost(secret)
          : oidc.ClientSecretBasic(secret);
    const configuration = new oidc.Configuration(metadata, app.clientId, undefined, auth);
    configuration[oidc.customFetch] = this.fetch;
    configuration.timeout = PROVIDER_TIMEOUT_SECONDS;
    if (insecure.length > 0) oidc.allowInsecureRequests(configuration);
    if (this.configurations.size >= 1_000) this.configurations.clear();
    this.configurations.set(app.id, { updatedAt: app.updatedAt.getTime(), configuration });
    return configuration;
  }

  /**
   * An issuer's endpoints from its discovery document (RFC 8414, falling back to OpenID Connect
   * Discovery), for registering an app with `--issuer`.
   */
  async discover(issuer: string): Promise<{ issuer: string; authorizationUrl: string; tokenUrl: string; revocationUrl: string | null }> {
    const url = new URL(issuer);
    const insecure = url.protocol === 'http:';
    if (insecure && !(this.settings.ALLOW_PRIVATE_UPSTREAMS && isLoopbackHost(url.hostname))) {
      throw new PlatformError('validation_failed', `The issuer ${issuer} is not https`, { hint: 'Providers are reached over https only.' });
    }
    const configuration = await oidc.discovery(url, 'discovery', undefined, undefined, {
      [oidc.customFetch]: this.fetch,
      timeout: PROVIDER_TIMEOUT_SECONDS,
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
    });
    const metadata = configuration.serverMetadata();
    if (!metadata.authorization_endpoint || !metadata.token_endpoint) {
      throw new PlatformError('validation_failed', `The issuer ${issuer} publishes no authorization or token endpoint`);
    }
    return {
      issuer: metadata.issuer,
      authorizationUrl: metadata.authorization_endpoint,
      tokenUrl: metadata.token_endpoint,
      revocationUrl: metadata.revocation_endpoint ?? null,
    };
  }

  async close(): Promise<void> {
    this.configurations.clear();
    await this.agent.close();
  }
}

/** How a request to a provider failed: it answered with an OAuth error (`refused`), or it could not be asked (`unreachable`). */
export interface ProviderFailure {
  kind: 'refused' | 'unreachable';
  /** The OAuth error code the provider answered (invalid_grant, invalid_client, ...), or null. Never its description. */
  error: string | null;
  status: number | null;
}

/** Classifies what an openid-client call threw. Only the standard error code is kept: a provider's prose is not shown. */
export function providerFailure(error: unknown): ProviderFailure {
  if (error instanceof oidc.ResponseBodyError) {
    return { kind: 'refused', error: /^[\x20-\x7e]{1,64}$/.test(error.error) ? error.error : 'invalid_response', status: error.status };
  }
  if (error instanceof oidc.AuthorizationResponseError) return { kind: 'refused', error: error.error, status: null };
  const status = (error as { cause?: { status?: unknown } })?.cause?.status;
  // A 4xx without an OAuth body (a misconfigured endpoint) is a refusal too; 5xx and network failures are not.
  if (typeof status === 'number' && status >= 400 && status < 500) return { kind: 'refused', error: null, status };
  return { kind: 'unreachable', error: null, status: typeof status === 'number' ? status : null };
}
