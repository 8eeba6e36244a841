import type { MeteredApi, PricingRule } from '#db/metered-apis';

const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * The one form of a proxied path that is priced and forwarded (RFC 3986 section 6.2.2): escapes of
 * unreserved characters are decoded (`%70remium` is `premium`) and every other escape gets upper-case
 * hex (`%2f` would be `%2F`, but escaped slashes, backslashes and NULs are refused earlier, by
 * proxyTarget). So no spelling of a path is priced as one thing and served as another.
 */
export function canonicalPath(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}

function ruleMatches(rule: PricingRule, method: string, path: string): boolean {
  if (rule.method && rule.method !== '*' && rule.method.toUpperCase() !== method.toUpperCase()) return false;
  if (rule.path.endsWith('*')) return path.startsWith(rule.path.slice(0, -1));
  // An exact rule also prices its trailing-slash spelling, which most upstreams serve the same.
  return path === rule.path || (path.length > 1 && path.endsWith('/') && path.slice(0, -1) === rule.path);
}

/**
 * The price of one call on a canonical path (see canonicalPath): the first matching pricing rule,
 * else the API's price; a call made with the caller's own key uses the bring-your-own-key price when
 * one is set (and no rule matched).
 */
export function priceOf(api: MeteredApi, method: string, path: string, byok: boolean): bigint {
  const rule = api.pricingRules.find((r) => ruleMatches(r, method, path));
  if (rule) return rule.priceMicros;
  if (byok && api.byokPriceMicros !== null) return api.byokPriceMicros;
  return api.priceMicros;
}
