import type { MeteredApi } from '#db/metered-apis';
import { openSecret, PlatformError, platformKeyContext } from '#core/platform';
import type { SealedConnectionKeys } from './connection-cache.js';
import { connectionKey } from './connections.js';
import { canonicalPath, methodsServed, priceOf } from './pricing.js';
import {
  assertPublicHost,
  knownPublicHost,
  upstreamAuth,
  upstreamBase,
  upstreamUrl,
  withAuthQuery,
  type UpstreamAuth,
  type UpstreamBase,
} from './upstream.js';

export interface PlanSettings {
  CONNECTIONS_MASTER_KEY: Buffer;
  ALLOW_PRIVATE_UPSTREAMS: boolean;
  UPSTREAM_DNS_CACHE_MS: number;
}

/**
 * Where a metered call gets the caller's OAuth access token for an API's provider (core/oauth's
 * OAuthTokenSource implements it; the gateway does not import the oauth context).
 */
export interface OAuthBearerSource {
  /**
   * The access token of the caller's connection to `api.provider`: the one `selector` names (label or
   * id, from X-Service-Connection), else the default. Null when the account has no connection to the
   * provider and named none. Throws the caller's answer when the named one does not exist or needs a
   * person again.
   */
  bearer(accountId: string, api: { id: string; provider: string }, selector: string | null): Promise<OAuthBearer | null>;
  /**
   * The upstream refused `refused` (401): renews its connection once, single-flight across edges (a
   * renewal since the token was issued makes it a no-op), and returns the token to retry with. Null
   * when there is none: the connection now needs a person, cannot be renewed, the provider could not
   * be reached, or the token is too fresh for a renewal to help. Never throws.
   */
  renewRefused(accountId: string, refused: OAuthBearer): Promise<OAuthBearer | null>;
}

/** An OAuth access token a call is sent with, and which grant it came from (never shown to anyone). */
export interface OAuthBearer {
  token: string;
  connectionId: string;
  /** When the connection's token was last renewed (or the connection made): what a 401's renewal is measured against. */
  renewedAt: Date;
}

/** The request header naming which OAuth connection a call uses (never forwarded: X-Service-* stays here). */
export const CONNECTION_HEADER = 'x-service-connection';

/** Everything decided about a metered call before it is charged and forwarded. */
export interface MeteredCallPlan {
  api: MeteredApi;
  /** The key the upstream gets (the caller's own, else the platform's), or null when it needs none. */
  key: string | null;
  /** True when the key is the caller's own (bring your own key). */
  byok: boolean;
  /** True when the operator's platform key is used: nothing the caller receives may contain it. */
  platformKey: boolean;
  /** True when the key is the access token of the caller's OAuth connection (which the caller never sees either). */
  oauth: boolean;
  /** The OAuth grant the key came from (for a renewal on the upstream's 401), else null. */
  oauthBearer: OAuthBearer | null;
  /** True when nothing the caller receives may contain the key (a platform key or an OAuth token): the answer is redacted. */
  secretKey: boolean;
  /** The key's query parameter for `query:NAME` APIs (stripped from redirects), else null. */
  keyParameter: string | null;
  /** A header carrying the key, to set upstream. */
  authHeader: [string, string] | null;
  /** The canonical path under the API's base URL: what is priced and what is forwarded. */
  path: string;
  origin: string;
  /** The base URL's path without trailing slashes ('' for the root). */
  basePath: string;
  /** Path and query sent upstream. */
  upstreamPath: string;
  costMicros: bigint;
}

/**
 * What a call plan needs of an API row that is the same for every call: the parsed base URL (or
 * null when it does not parse), the opened platform key, and the sets of request headers not to
 * forward. Kept per row object, which the edge's API cache hands out until the row is evicted or
 * expires (a row read again is a new object, so a change is picked up with it).
 */
interface ApiProfile {
  base: UpstreamBase | null;
  /** The opened platform key; undefined until a call needs it. */
  platformKey?: string;
  /** Request headers not forwarded, one set per case (see droppedRequestHeaders). */
  dropSets: Array<ReadonlySet<string> | undefined>;
}
const profiles = new WeakMap<MeteredApi, ApiProfile>();

function apiProfile(api: MeteredApi): ApiProfile {
  let profile = profiles.get(api);
  if (profile === undefined) {
    let base: UpstreamBase | null;
    try {
      base = upstreamBase(api.baseUrl);
    } catch {
      base = null;
    }
    profile = { base, dropSets: [] };
    profiles.set(api, profile);
  }
  return profile;
}

/**
 * Plans one metered call, for the HTTP proxy and any other door (an MCP tool) alike: the base URL
 * and its address rules, the key (the caller's own before the platform's), the canonical path, the
 * upstream URL with the key where the API wants it, and the price. Charges nothing: MeteredCall
 * (metered-call.ts) charges, forwards and settles.
 */
export async function planMeteredCall(
  connections: SealedConnectionKeys,
  settings: PlanSettings,
  api: MeteredApi,
  accountId: string,
  request: { method: string; path: string; query: string | null; headers?: readonly string[] },
  oauth: OAuthBearerSource | null = null,
): Promise<MeteredCallPlan> {
  const profile = apiProfile(api);
  const base = profile.base;
  if (base === null) {
    throw new PlatformError('upstream_unavailable', `API ${api.id} has no valid base URL`, {
      hint: 'Nothing was charged.',
      headers: { 'Retry-After': '3600' },
    });
  }
  if (!settings.ALLOW_PRIVATE_UPSTREAMS && !knownPublicHost(base.hostname, settings.UPSTREAM_DNS_CACHE_MS)) {
    await assertPublicHost(base.hostname, settings.UPSTREAM_DNS_CACHE_MS);
  }
  const { key, byok, viaOAuth, bearer } =
    api.authScheme.type === 'none'
      ? NO_KEY
      : await upstreamKey(connections, oauth, settings, api, accountId, profile, connectionSelector(request.headers));
  const auth: UpstreamAuth = upstreamAuth(api.authScheme, key);
  const path = canonicalPath(request.path);
  const query = auth && 'query' in auth ? withAuthQuery(request.query, ...auth.query) : request.query;
  const url = upstreamUrl(base, { path, query });
  return {
    api,
    key,
    byok,
    platformKey: key !== null && !byok,
    oauth: viaOAuth,
    oauthBearer: bearer,
    secretKey: key !== null && (!byok || viaOAuth),
    keyParameter: auth && 'query' in auth ? auth.query[0] : null,
    authHeader: auth && 'header' in auth ? auth.header : null,
    path: path || '/',
    origin: url.origin,
    basePath: base.basePath,
    upstreamPath: url.path,
    // Priced as the most expensive of the methods the upstream may serve it as (method overrides).
    costMicros: priceOf(api, methodsServed(request.method, request.headers ?? [], request.query), path || '/', byok),
  };
}

/**
 * The request headers (lowercase) a planned call does not forward on top of the fixed rules of
 * `upstreamRequestHeaders`: the header the upstream auth sets, Content-Length when no body is
 * forwarded (it would promise bytes that never come), and Accept-Encoding on a platform-key or OAuth
 * call (its answer is redacted byte by byte, so it must come uncompressed). One set per API and case.
 */
export function droppedRequestHeaders(plan: MeteredCallPlan, hasBody: boolean): ReadonlySet<string> {
  const sets = apiProfile(plan.api).dropSets;
  const index = (plan.authHeader ? 1 : 0) + (hasBody ? 0 : 2) + (plan.secretKey ? 4 : 0);
  let set = sets[index];
  if (set === undefined) {
    const names = new Set<string>();
    if (plan.authHeader) names.add(plan.authHeader[0].toLowerCase());
    if (!hasBody) names.add('content-length');
    if (plan.secretKey) names.add('accept-encoding');
    set = names;
    sets[index] = set;
  }
  return set;
}

/**
 * The plan of a call's retry with a renewed OAuth token: the same call, the new token in the header
 * the API takes it in. Null when the API takes its key elsewhere (in the query), where no retry is made.
 */
export function withRenewedBearer(plan: MeteredCallPlan, bearer: OAuthBearer): MeteredCallPlan | null {
  if (!plan.oauth || plan.keyParameter !== null) return null;
  const auth = upstreamAuth(plan.api.authScheme, bearer.token);
  if (!auth || !('header' in auth)) return null;
  return { ...plan, key: bearer.token, oauthBearer: bearer, authHeader: auth.header };
}

const NO_KEY = { key: null, byok: false, viaOAuth: false, bearer: null } as const;

/** The connection X-Service-Connection names, or null (the first one when sent twice). */
function connectionSelector(headers: readonly string[] | undefined): string | null {
  if (!headers) return null;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === CONNECTION_HEADER) {
      const value = headers[i + 1]!.trim();
      return value === '' ? null : value;
    }
  }
  return null;
}

/**
 * The key the upstream gets. For an OAuth 2 API with a provider: the caller's OAuth connection (the
 * one X-Service-Connection names, else the default). Then the caller's own key (bring your own key),
 * then the operator's platform key.
 */
async function upstreamKey(
  connections: SealedConnectionKeys,
  oauth: OAuthBearerSource | null,
  settings: PlanSettings,
  api: MeteredApi,
  accountId: string,
  profile: ApiProfile,
  selector: string | null,
): Promise<{ key: string | null; byok: boolean; viaOAuth: boolean; bearer: OAuthBearer | null }> {
  if (api.authScheme.type === 'none') return NO_KEY;
  const provider = api.authScheme.type === 'oauth2' ? api.oauthProvider : null;
  if (provider && oauth) {
    const bearer = await oauth.bearer(accountId, { id: api.id, provider }, selector);
    if (bearer !== null) return { key: bearer.token, byok: true, viaOAuth: true, bearer };
  }
  const own = await connectionKey(connections, settings.CONNECTIONS_MASTER_KEY, accountId, api.id);
  if (own !== null) return { key: own, byok: true, viaOAuth: false, bearer: null };
  if (api.platformKeyEncrypted) {
    profile.platformKey ??= openSecret(settings.CONNECTIONS_MASTER_KEY, api.platformKeyEncrypted, platformKeyContext(api.id));
    return { key: profile.platformKey, byok: false, viaOAuth: false, bearer: null };
  }
  if (provider) {
    throw new PlatformError('connection_required', `${api.id} needs your OAuth connection to ${provider}, and you have none`, {
      hint:
        `Nothing was charged. A person connects ${provider} in the dashboard (Connections, "Connect"); ` +
        `an agent can ask one with POST /api/v1/connect/${api.id}/request {"purpose": "..."} and call again once it is granted.`,
      tool: { hint: askAPerson(api.id, `A person connects ${provider} in the dashboard (Connections)`) },
    });
  }
  throw new PlatformError('connection_required', `${api.id} needs a key and the platform has none for it`, {
    hint: `Nothing was charged. Connect your own key with POST /api/v1/connect/${api.id} {"apiKey": "..."}; an agent asks a person to connect it with POST /api/v1/connect/${api.id}/request {"purpose": "what you want to do and why"} (MCP: request_connection).`,
    tool: { hint: askAPerson(api.id, "A person connects the account's own key in the dashboard (Connections)") },
  });
}

/** A connection_required hint as a tool caller (MCP) reads it: ask a person with request_connection. */
export function askAPerson(apiId: string, who: string): string {
  return `Nothing was charged. ${who}; ask for it with request_connection (apiId: "${apiId}", purpose: what you want to do and why), wait with get_connection_request until it is connected, then call again.`;
}

/**
 * The refund rule of an upstream's answer: a 5xx is the upstream's failure, so the call is refunded
 * and answered 502 (503 stays 503, with Retry-After) carrying an excerpt of the upstream's body.
 */
export function upstreamFailure(apiId: string, status: number, excerpt: string, retryAfter: string): PlatformError {
  if (status === 503) {
    return new PlatformError('upstream_unavailable', `${apiId} is temporarily unavailable (upstream answered 503)`, {
      hint: 'The call was refunded. Retry after the number of seconds in Retry-After.',
      headers: { 'Retry-After': retryAfter },
      details: { upstream: { status, body: excerpt } },
    });
  }
  return new PlatformError('upstream_error', `${apiId} answered with an error (${status})`, {
    hint: 'The call was refunded. The upstream error is in `upstream`.',
    details: { upstream: { status, body: excerpt } },
  });
}
