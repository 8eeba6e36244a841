import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup as dnsLookupAsync } from 'node:dns/promises';
import { isIP } from 'node:net';
import { PlatformError } from '#core/platform';
import type { AuthScheme } from '#contracts/auth-scheme';
import { isPrivateAddress } from './addresses.js';

export class PrivateUpstreamError extends Error {
  override name = 'PrivateUpstreamError';
  readonly code = 'PRIVATE_UPSTREAM';
}

// Neither message names the host: an operator API's base URL is not published (published-base-urls).
const privateRefusal = () =>
  new PlatformError('private_upstream', 'The upstream resolves to a private, loopback or link-local address; the proxy refuses it', {
    hint: 'Register the API with a public base URL. (Operators: ALLOW_PRIVATE_UPSTREAMS=true is for tests only.)',
  });

/** Hosts whose every address was public at their last check, until when (see assertPublicHost). */
const publicHosts = new Map<string, number>();

/** True when `assertPublicHost(hostname, cacheMs)` would pass on its cache alone (no need to wait for it). */
export function knownPublicHost(hostname: string, cacheMs: number): boolean {
  return cacheMs > 0 && (publicHosts.get(hostname) ?? 0) > Date.now();
}

/**
 * Resolves the upstream host and refuses it when any address is private. Before anything is charged.
 * With `cacheMs`, a host found public is not resolved again for that long (refusals and failures are
 * never cached). This check only spares the caller a charge; the guard against DNS rebinding is
 * `guardedLookup`, which resolves afresh and refuses private addresses whenever a connection opens.
 */
export async function assertPublicHost(hostname: string, cacheMs = 0): Promise<void> {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    if (isPrivateAddress(host)) throw privateRefusal();
    return;
  }
  if (cacheMs > 0 && (publicHosts.get(host) ?? 0) > Date.now()) return;
  let addresses: LookupAddress[];
  try {
    addresses = await dnsLookupAsync(host, { all: true });
  } catch {
    throw new PlatformError('upstream_unavailable', 'The upstream host could not be resolved', {
      hint: 'Nothing was charged. Retry later.',
      headers: { 'Retry-After': '30' },
    });
  }
  if (addresses.length === 0 || addresses.some((a) => isPrivateAddress(a.address))) {
    publicHosts.delete(host);
    throw privateRefusal();
  }
  if (cacheMs > 0) {
    if (publicHosts.size >= 10_000) publicHosts.clear();
    publicHosts.set(host, Date.now() + cacheMs);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the proxy's sockets that refuses private addresses at connect time, so a DNS
 * answer that changes between the check and the connection (rebinding) cannot reach them either.
 */
export function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    if (addresses.length === 0 || addresses.some((a) => isPrivateAddress(a.address))) {
      return callback(new PrivateUpstreamError(`${hostname} resolves to a private address`), []);
    }
    if ((options as { all?: boolean }).all) return callback(null, addresses);
    const first = addresses[0] as LookupAddress;
    return callback(null, first.address, first.family);
  });
}

const badPath = (why: string) =>
  new PlatformError('validation_failed', `Invalid proxy path: ${why}`, {
    hint: 'The path after /proxy/{api_id} is appended to the API base URL; it may not contain "..", "//", backslashes or encoded slashes.',
  });

/**
 * Splits the raw request target of a proxy call into the upstream path remainder and query string,
 * both as the caller sent them (bytes, not re-encoded), refusing anything that could leave the API's
 * base URL: dot segments (also percent-encoded), encoded slashes or backslashes, backslashes, `//`.
 */
export function proxyTarget(rawUrl: string, segmentsBefore: number): { path: string; query: string | null } {
  const q = rawUrl.indexOf('?');
  let rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? null : rawUrl.slice(q + 1);
  // An absolute-form target (`GET http://host/api/v1/proxy/...`, routed like its path) loses its scheme and host.
  if (!rawPath.startsWith('/')) rawPath = rawPath.replace(/^https?:\/\/[^/]*/i, '');
  // The remainder starts at the slash after the first `segmentsBefore` segments.
  let at = 0;
  for (let n = 0; n < segmentsBefore && at !== -1; n += 1) at = rawPath.indexOf('/', at + 1);
  const path = at === -1 ? '' : rawPath.slice(at);
  if (path.includes('\\')) throw badPath('backslash');
  if (/%(2f|5c|00)/i.test(path)) throw badPath('encoded slash, backslash or NUL');
  if (path.includes('//')) throw badPath('empty segment ("//")');
  // A segment can only be (or decode to) a dot segment, or fail to decode, with a dot or a `%` in it.
  if (path.includes('/.') || path.includes('%')) {
    for (const segment of path.split('/')) {
      let decoded: string;
      try {
        decoded = decodeURIComponent(segment);
      } catch {
        throw badPath('malformed percent-encoding');
      }
      if (isDotSegment(decoded)) throw badPath('dot segment');
      // `..;x`, `%2e%2e;` and `.;`: Tomcat, Jetty and Spring drop path parameters and read `..`.
      const semicolon = decoded.indexOf(';');
      if (semicolon !== -1 && isDotSegment(decoded.slice(0, semicolon))) throw badPath('dot segment with a path parameter');
    }
  }
  return { path, query };
}

/**
 * A segment some server would read as `.` or `..`: only dots, or dots followed by spaces and dots
 * (Windows and IIS drop trailing dots and spaces from path segments).
 */
function isDotSegment(segment: string): boolean {
  return /^\.[. ]*$/.test(segment);
}

/** An API's base URL, parsed once (see `planMeteredCall`, which keeps it per cached API row). */
export interface UpstreamBase {
  origin: string;
  hostname: string;
  /** The base URL's path without trailing slashes ('' for the root). */
  basePath: string;
}

/** Parses a base URL; throws (TypeError) when it is not a URL. */
export function upstreamBase(baseUrl: string): UpstreamBase {
  const base = new URL(baseUrl);
  return { origin: base.origin, hostname: base.hostname, basePath: base.pathname.replace(/\/+$/, '') };
}

/**
 * Path characters a URL parser takes as they are (RFC 3986 pchar and "/"): a path of only these,
 * starting with "/", without "//" and without anything that could be a dot segment, is its own
 * parsed pathname (`proxyTarget` refuses the rest but "/." in names such as "/.well-known").
 */
const PLAIN_PATH = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
const isPlainPath = (path: string) =>
  path === '' || (path.startsWith('/') && PLAIN_PATH.test(path) && !path.includes('//') && !path.includes('/.') && !/%2e/i.test(path));

/**
 * The upstream URL: the base URL's path plus the remainder (as `proxyTarget` returns it), with the
 * query unchanged. The result is checked to stay on the base URL's origin and under its path; a
 * remainder of plain path characters only cannot leave it, and is not parsed again.
 */
export function upstreamUrl(baseUrl: string | UpstreamBase, target: { path: string; query: string | null }): { origin: string; path: string } {
  const { origin, basePath } = typeof baseUrl === 'string' ? upstreamBase(baseUrl) : baseUrl;
  const path = `${basePath}${target.path}` || '/';
  const withQuery = target.query === null ? path : `${path}?${target.query}`;
  if (!isPlainPath(target.path)) {
    let url: URL;
    try {
      url = new URL(withQuery, origin);
    } catch {
      // The parser drops tabs and newlines: "/\n/" reads as "//", a host-relative URL without a host.
      throw badPath('it leaves the API base URL');
    }
    if (url.origin !== origin || (url.pathname !== basePath && !url.pathname.startsWith(`${basePath}/`))) {
      throw badPath('it leaves the API base URL');
    }
  }
  return { origin, path: withQuery };
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-connection', 'http2-settings']);
/** Caller credentials and platform headers that never reach an upstream. */
const CALLER_ONLY = new Set(['host', 'authorization', 'x-api-key', 'cookie', 'x-csrf-token', 'x-max-cost', 'forwarded', 'x-real-ip', 'expect']);
/** Both, for the one look-up per header of the request path. */
const NEVER_UPSTREAM = new Set([...HOP_BY_HOP, ...CALLER_ONLY]);
const NOTHING: ReadonlySet<string> = new Set();

/**
 * `named` plus the names (lowercase) a Connection header lists, as a new set; `named` itself when it
 * lists nothing new (`keep-alive`, a hop-by-hop name dropped anyway).
 */
function withConnectionTokens(value: string, named: ReadonlySet<string>): ReadonlySet<string> {
  // The usual value names a header dropped anyway.
  if (value === 'keep-alive' || value === 'Keep-Alive') return named;
  let out: Set<string> | null = null;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (HOP_BY_HOP.has(name) || named.has(name)) continue;
    out ??= new Set(named);
    out.add(name);
  }
  return out ?? named;
}

/**
 * The headers sent upstream: the caller's, in order and with duplicates, minus hop-by-hop headers
 * (and those the caller's Connection header names), the caller's credentials and cookies, platform
 * headers (`X-Max-Cost`, `X-Service-*`, `X-Forwarded-*`) and any header the upstream auth sets.
 * `drop` is a list of names, or a set of lowercase names (reused across calls, never changed here).
 */
export function upstreamRequestHeaders(rawHeaders: string[], drop: readonly string[] | ReadonlySet<string> = NOTHING): string[] {
  let named: ReadonlySet<string> = drop instanceof Set ? drop : new Set((drop as readonly string[]).map((h) => h.toLowerCase()));
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 10 && name.toLowerCase() === 'connection') named = withConnectionTokens(rawHeaders[i + 1] ?? '', named);
  }
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (NEVER_UPSTREAM.has(lower) || named.has(lower)) continue;
    if (lower.startsWith('proxy-') || lower.startsWith('x-service-') || lower.startsWith('x-forwarded-')) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  return out;
}

/** `limit-remaining` as `Limit-Remaining`. */
const titleCase = (name: string) => name.replace(/(^|-)([a-z])/g, (_match, dash: string, letter: string) => `${dash}${letter.toUpperCase()}`);

/**
 * `x-ratelimit-remaining` as `X-Upstream-RateLimit-Remaining`, built once per name: upstreams send
 * the same few names on every answer, so the hot path reads a map instead of building the name.
 * Bounded, as the names come from upstreams.
 */
const renamedLimits = new Map<string, string>();
function upstreamLimitName(lower: string): string {
  let renamed = renamedLimits.get(lower);
  if (renamed === undefined) {
    renamed = `X-Upstream-RateLimit-${titleCase(lower.slice(12))}`;
    if (renamedLimits.size < 256) renamedLimits.set(lower, renamed);
  }
  return renamed;
}

/**
 * Headers of the upstream's answer passed on to the caller: not hop-by-hop, no cookies, no spoofed
 * platform headers; its `X-RateLimit-*` and `X-Request-Id` as `X-Upstream-RateLimit-*` and
 * `X-Upstream-Request-Id`.
 */
export function downstreamResponseHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const connection = headers.connection;
  const named = connection === undefined ? NOTHING : withConnectionTokens(String(connection), NOTHING);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named.has(lower) || lower.startsWith('proxy-')) continue;
    if (lower === 'set-cookie' || lower.startsWith('x-service-')) continue;
    // The upstream's own limits and request id reach the caller under names that cannot be taken
    // for the platform's (which sets X-RateLimit-* and X-Request-Id of its own).
    if (lower === 'x-request-id') out['X-Upstream-Request-Id'] = value;
    else if (lower.startsWith('x-ratelimit-')) out[upstreamLimitName(lower)] = value;
    else out[name] = value;
  }
  return out;
}

/** How the upstream key travels: a header to set, or a query parameter to append. */
export type UpstreamAuth = { header: [string, string] } | { query: [string, string] } | null;

export function upstreamAuth(scheme: AuthScheme, key: string | null): UpstreamAuth {
  if (key === null) return null;
  switch (scheme.type) {
    case 'none':
      return null;
    case 'apiKey':
      if (scheme.in === 'query') return { query: [scheme.name, key] };
      // A cookie-borne key is the only cookie the upstream gets (the caller's own never pass).
      return scheme.in === 'cookie' ? { header: ['Cookie', `${scheme.name}=${key}`] } : { header: [scheme.name, key] };
    case 'bearer':
    case 'oauth2':
      return { header: ['Authorization', `Bearer ${key}`] };
    case 'basic':
      return { header: ['Authorization', `Basic ${Buffer.from(key.includes(':') ? key : `${key}:`).toString('base64')}`] };
  }
}

/** Appends the auth query parameter, replacing one of the same name the caller sent. */
export function withAuthQuery(query: string | null, name: string, value: string): string {
  const encodedName = encodeURIComponent(name);
  const kept = (query ?? '').split('&').filter((pair) => pair !== '' && pair.split('=')[0] !== encodedName && pair.split('=')[0] !== name);
  return [...kept, `${encodedName}=${encodeURIComponent(value)}`].join('&');
}
