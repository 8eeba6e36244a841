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

/** Everything decided about a metered call before it is charged and forwarded. */
export interface MeteredCallPlan {
  api: MeteredApi;
  /** The key the upstream gets (the caller's own, else the platform's), or null when it needs none. */
  key: string | null;
  /** True when the key is the caller's own (bring your own key). */
  byok: boolean;
  /** True when the operator's platform key is used: nothing the caller receives may contain it. */
  platformKey: boolean;
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
  const { key, byok } = api.authScheme.type === 'none' ? NO_KEY : await upstreamKey(connections, settings, api, accountId, profile);
  const auth: UpstreamAuth = upstreamAuth(api.authScheme, key);
  const path = canonicalPath(request.path);
  const query = auth && 'query' in auth ? withAuthQuery(request.query, ...auth.query) : request.query;
  const url = upstreamUrl(base, { path, query });
  return {
    api,
    key,
    byok,
    platformKey: key !== null && !byok,
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
 * forwarded (it would promise bytes that never come), and Accept-Encoding on a platform-key call
 * (its answer is redacted byte by byte, so it must come uncompressed). One set per API and case.
 */
export function droppedRequestHeaders(plan: MeteredCallPlan, hasBody: boolean): ReadonlySet<string> {
  const sets = apiProfile(plan.api).dropSets;
  const index = (plan.authHeader ? 1 : 0) + (hasBody ? 0 : 2) + (plan.platformKey ? 4 : 0);
  let set = sets[index];
  if (set === undefined) {
    const names = new Set<string>();
    if (plan.authHeader) names.add(plan.authHeader[0].toLowerCase());
    if (!hasBody) names.add('content-length');
    if (plan.platformKey) names.add('accept-encoding');
    set = names;
    sets[index] = set;
  }
  return set;
}

const NO_KEY = { key: null, byok: false } as const;

/** The key the upstream gets: the caller's own (bring your own key) before the operator's platform key. */
async function upstreamKey(
  connections: SealedConnectionKeys,
  settings: PlanSettings,
  api: MeteredApi,
  accountId: string,
  profile: ApiProfile,
): Promise<{ key: string | null; byok: boolean }> {
  if (api.authScheme.type === 'none') return NO_KEY;
  const own = await connectionKey(connections, settings.CONNECTIONS_MASTER_KEY, accountId, api.id);
  if (own !== null) return { key: own, byok: true };
  if (api.platformKeyEncrypted) {
    profile.platformKey ??= openSecret(settings.CONNECTIONS_MASTER_KEY, api.platformKeyEncrypted, platformKeyContext(api.id));
    return { key: profile.platformKey, byok: false };
  }
  throw new PlatformError('connection_required', `${api.id} needs a key and the platform has none for it`, {
    hint: `Nothing was charged. Connect your own key with POST /api/v1/connect/${api.id} {"apiKey": "..."}.`,
  });
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
