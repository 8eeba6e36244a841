import type { MeteredApi } from '#db/metered-apis';
import type { Db } from '#db/sql';
import { openSecret, PlatformError, platformKeyContext } from '#core/platform';
import { connectionKey } from './connections.js';
import { canonicalPath, priceOf } from './pricing.js';
import { assertPublicHost, upstreamAuth, upstreamUrl, withAuthQuery, type UpstreamAuth } from './upstream.js';

export interface MeteredCallSettings {
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
  /** Path and query sent upstream. */
  upstreamPath: string;
  costMicros: bigint;
}

/**
 * Plans one metered call, for the HTTP proxy and any other door (an MCP tool) alike: the base URL
 * and its address rules, the key (the caller's own before the platform's), the canonical path, the
 * upstream URL with the key where the API wants it, and the price. Charges nothing.
 */
export async function planMeteredCall(
  db: Db,
  settings: MeteredCallSettings,
  api: MeteredApi,
  accountId: string,
  request: { method: string; path: string; query: string | null },
): Promise<MeteredCallPlan> {
  let base: URL;
  try {
    base = new URL(api.baseUrl);
  } catch {
    throw new PlatformError('upstream_unavailable', `API ${api.id} has no valid base URL`, { hint: 'Nothing was charged.', headers: { 'Retry-After': '3600' } });
  }
  if (!settings.ALLOW_PRIVATE_UPSTREAMS) await assertPublicHost(base.hostname, settings.UPSTREAM_DNS_CACHE_MS);
  const { key, byok } = await upstreamKey(db, settings, api, accountId);
  const auth: UpstreamAuth = upstreamAuth(api.authScheme, key);
  const path = canonicalPath(request.path);
  const query = auth && 'query' in auth ? withAuthQuery(request.query, ...auth.query) : request.query;
  const url = upstreamUrl(api.baseUrl, { path, query });
  return {
    api,
    key,
    byok,
    platformKey: key !== null && !byok,
    keyParameter: auth && 'query' in auth ? auth.query[0] : null,
    authHeader: auth && 'header' in auth ? auth.header : null,
    path: path || '/',
    origin: url.origin,
    upstreamPath: url.path,
    costMicros: priceOf(api, request.method, path || '/', byok),
  };
}

/** The key the upstream gets: the caller's own (bring your own key) before the operator's platform key. */
async function upstreamKey(db: Db, settings: MeteredCallSettings, api: MeteredApi, accountId: string): Promise<{ key: string | null; byok: boolean }> {
  if (api.authScheme.type === 'none') return { key: null, byok: false };
  const own = await connectionKey(db, settings.CONNECTIONS_MASTER_KEY, accountId, api.id);
  if (own !== null) return { key: own, byok: true };
  if (api.platformKeyEncrypted) {
    return { key: openSecret(settings.CONNECTIONS_MASTER_KEY, api.platformKeyEncrypted, platformKeyContext(api.id)), byok: false };
  }
  throw new PlatformError('connection_required', `${api.id} needs a key and the platform has none for it`, {
    hint: `Nothing was charged. Connect your own key with POST /api/v1/connect/${api.id} {"apiKey": "..."}.`,
  });
}

/**
 * The refund rule of an upstream's answer: a 5xx is the upstream's failure, so the call is refunded
 * and answered 502 (503 stays 503, with Retry-After) carrying an excerpt of the upstream's body.
 */
export function upstreamFailure(
  apiId: string,
  status: number,
  excerpt: string,
  retryAfter: string,
): PlatformError {
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
