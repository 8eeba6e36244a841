/**
 * A redirect of the upstream's, moved into the door's space (as nginx's `proxy_redirect default`
 * does): a `Location` on the API's own origin and under its base URL, absolute or origin-relative,
 * becomes the same place under `doorBase` (`/api/v1/proxy/{api_id}` over REST, '' for MCP's
 * call_api, whose paths are relative to the base URL). Following it then goes through the metered
 * proxy again instead of leaving it: to the edge's own 404, or to the upstream directly, unmetered.
 * A target elsewhere (another host, outside the base URL) is left as it is.
 */
export function doorLocation(location: string, upstream: { origin: string; basePath: string }, doorBase: string): string {
  let path: string;
  if (location.startsWith('/') && !location.startsWith('//')) {
    path = location;
  } else {
    let url: URL;
    try {
      url = new URL(location, `${upstream.origin}/`);
    } catch {
      return location;
    }
    // A relative reference ("next", "../x") resolves against the request's own URL, which is already the door's.
    if (!/^([a-z][a-z0-9+.-]*:)?\/\//i.test(location) || url.origin !== upstream.origin) return location;
    path = `${url.pathname}${url.search}${url.hash}`;
  }
  const base = upstream.basePath;
  if (base !== '' && path !== base && !path.startsWith(`${base}/`) && !path.startsWith(`${base}?`) && !path.startsWith(`${base}#`)) return location;
  const rest = path.slice(base.length);
  const joined = `${doorBase}${rest}`;
  return joined === '' || joined.startsWith('?') || joined.startsWith('#') ? `/${joined}` : joined;
}
