import type { MeteredApi, PricingRule } from '#db/metered-apis';

const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * The one form of a proxied path that is forwarded (RFC 3986 section 6.2.2): escapes of unreserved
 * characters are decoded (`%70remium` is `premium`) and every other escape gets upper-case hex
 * (`%2f` would be `%2F`, but escaped slashes, backslashes and NULs are refused earlier, by
 * proxyTarget). So no spelling of a path is priced as one thing and served as another.
 */
export function canonicalPath(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}

/**
 * The path a price rule is matched against: the canonical path as the most lenient common server
 * would route it, so no spelling is priced below what some upstream serves for it:
 * - letter case folded (Express, ASP.NET and IIS route case-insensitively by default);
 * - path parameters dropped from every segment (`/premium;v=1/x` and `/premium%3Bv=1/x` are
 *   `/premium/x` to Tomcat, Jetty and Spring);
 * - trailing dots and spaces dropped from every segment (Windows and IIS), then empty segments.
 */
export function pricedPath(path: string): string {
  const lower = path.toLowerCase();
  if (!/[;.]|%3b|%20|\/\//.test(lower)) return lower;
  const segments = lower.split('/').map((segment) => {
    const bare = segment.split(/;|%3b/)[0] ?? '';
    // Windows and IIS drop trailing dots and spaces (`/premium./x` is `/premium/x`).
    return /^\.+$/.test(bare) ? bare : bare.replace(/(?:\.|%20)+$/, '');
  });
  // A segment left empty (`/;x/premium`, `/%20/premium`) is no segment to a lenient server.
  return segments.filter((segment, i) => i === 0 || segment !== '').join('/') || '/';
}

/** Headers by which a client asks a server to treat a request as another method. */
const OVERRIDE_HEADERS = new Set(['x-http-method-override', 'x-http-method', 'x-method-override']);
const METHOD_TOKEN = /^[A-Za-z]{1,16}$/;

/**
 * Every method the upstream may serve a request as: its own, and any that a method-override header
 * (`X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`) or a `_method` query parameter
 * asks for. A call is priced as the most expensive of them, since the proxy cannot know which the
 * upstream honours. Usually just `[method]`.
 */
export function methodsServed(method: string, rawHeaders: readonly string[], query: string | null): string[] {
  // (No closure and no lower-cased copy of a header name unless its length fits: this runs on every proxied call.)
  let methods: string[] | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length >= 12 && name.length <= 22 && OVERRIDE_HEADERS.has(name.toLowerCase()))
      methods = addMethods(methods, method, rawHeaders[i + 1] ?? '');
  }
  if (query !== null && query.includes('_method')) {
    for (const pair of query.split('&')) {
      const at = pair.indexOf('=');
      if (at !== -1 && pair.slice(0, at) === '_method') methods = addMethods(methods, method, safeDecode(pair.slice(at + 1)));
    }
  }
  return methods ?? [method];
}

/** The methods named in one override value (comma-separated) added to `methods` (started with the request's own). */
function addMethods(methods: string[] | null, method: string, value: string): string[] | null {
  for (const token of value.split(',')) {
    const candidate = token.trim();
    if (!METHOD_TOKEN.test(candidate)) continue;
    methods ??= [method.toUpperCase()];
    if (!methods.includes(candidate.toUpperCase())) methods.push(candidate.toUpperCase());
  }
  return methods;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

/** A format suffix most frameworks route to the same handler (`/report.json` is `/report`). */
const FORMAT_SUFFIX = /\.[a-z0-9]{1,5}$/;

function ruleMatches(rule: PricingRule, method: string, path: string): boolean {
  if (rule.method && rule.method !== '*' && rule.method.toUpperCase() !== method.toUpperCase()) return false;
  const rulePath = rule.path.toLowerCase();
  if (rulePath.endsWith('*')) return path.startsWith(rulePath.slice(0, -1));
  if (path === rulePath) return true;
  // An exact rule also prices its trailing-slash and format-suffix spellings, which most upstreams serve the same.
  const bare = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return bare === rulePath || (FORMAT_SUFFIX.test(bare) && !FORMAT_SUFFIX.test(rulePath) && bare.replace(FORMAT_SUFFIX, '') === rulePath);
}

/**
 * The price of one call on an operation as its description writes it (`GET /v1/voices/{id}`): the
 * first pricing rule matching its method and path (a template is matched as written, lower-cased),
 * else the API's price. What discovery shows next to a matching operation.
 */
export function operationPriceMicros(rules: readonly PricingRule[], priceMicros: bigint, method: string, path: string): bigint {
  if (rules.length === 0) return priceMicros;
  const priced = pricedPath(path);
  return rules.find((r) => ruleMatches(r, method, priced))?.priceMicros ?? priceMicros;
}

function priceFor(api: MeteredApi, method: string, path: string, byok: boolean): bigint {
  const rule = api.pricingRules.find((r) => ruleMatches(r, method, path));
  if (rule) return rule.priceMicros;
  if (byok && api.byokPriceMicros !== null) return api.byokPriceMicros;
  return api.priceMicros;
}

/**
 * The price of one call on a canonical path (see canonicalPath): the first pricing rule matching
 * the priced path (see pricedPath), else the API's price; a call made with the caller's own key uses
 * the bring-your-own-key price when one is set (and no rule matched). With several methods (see
 * methodsServed), the highest of their prices.
 */
export function priceOf(api: MeteredApi, method: string | readonly string[], path: string, byok: boolean): bigint {
  const priced = api.pricingRules.length === 0 ? path : pricedPath(path);
  if (typeof method === 'string') return priceFor(api, method, priced, byok);
  let price = 0n;
  for (const m of method) {
    const p = priceFor(api, m, priced, byok);
    if (p > price) price = p;
  }
  return price;
}
