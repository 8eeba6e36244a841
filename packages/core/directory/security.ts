/**
 * What an OpenAPI description says about authentication, read for the directory: the auth scheme the
 * proxy sends, the OAuth 2 description (flows, URLs, scopes), who issues the tokens (the provider
 * key one OAuth app registration serves), the scopes each operation declares, and where a caller
 * gets a key of their own. Pure functions; the importer and the operator CLI use them.
 */
import { apiOAuthSchema, type ApiOAuth, type AuthScheme } from '#contracts/auth-scheme';
import { isIP } from 'node:net';
import { plainText } from './text.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v.trim() : null);

/** Scopes kept per API (the largest description in the catalog declares 183). */
export const MAX_API_SCOPES = 500;
/** Scopes kept per endpoint. */
export const MAX_ENDPOINT_SCOPES = 40;
const MAX_SCOPE_NAME = 300;
const MAX_SCOPE_DESCRIPTION = 300;
const MAX_URL = 2000;

/** Every security scheme of the description (OpenAPI 3 `components.securitySchemes`, Swagger 2 `securityDefinitions`). */
export function securitySchemes(spec: Obj): Obj {
  return { ...obj(spec.securityDefinitions), ...obj(obj(spec.components).securitySchemes) };
}

/** The scheme's name the description requires globally, else its first scheme's; null without schemes. */
function chosenSchemeName(spec: Obj, schemes: Obj): string | null {
  const names = Object.keys(schemes);
  if (names.length === 0) return null;
  const required = Array.isArray(spec.security) ? spec.security.flatMap((s) => Object.keys(obj(s))) : [];
  return required.find((n) => n in schemes) ?? names[0]!;
}

/** How the proxy sends the caller's credential (see docs/decisions/directory-normalization.md). */
export function authSchemeOf(spec: Obj): AuthScheme {
  const schemes = securitySchemes(spec);
  const name = chosenSchemeName(spec, schemes);
  if (name === null) return { type: 'none' };
  const chosen = obj(schemes[name]);
  const type = str(chosen.type)?.toLowerCase();
  if (type === 'apikey') {
    const where = str(chosen.in);
    return { type: 'apiKey', in: where === 'query' || where === 'cookie' ? where : 'header', name: str(chosen.name) ?? 'X-API-Key' };
  }
  if (type === 'http') return str(chosen.scheme)?.toLowerCase() === 'basic' ? { type: 'basic' } : { type: 'bearer' };
  if (type === 'basic') return { type: 'basic' };
  return { type: 'oauth2' };
}

/** The OAuth 2 schemes' names: those the description requires globally first, then the others. */
function oauthSchemeNames(spec: Obj, schemes: Obj): string[] {
  const oauth = Object.keys(schemes).filter((n) => str(obj(schemes[n]).type)?.toLowerCase() === 'oauth2');
  const required = new Set(Array.isArray(spec.security) ? spec.security.flatMap((s) => Object.keys(obj(s))) : []);
  return [...oauth.filter((n) => required.has(n)), ...oauth.filter((n) => !required.has(n))];
}

/**
 * An absolute http(s) URL out of a description's URL field. Relative URLs (a few descriptions write
 * `/oauth/authorize`) are read against the API's base URL, as OpenAPI 3.1 says.
 */
function absoluteUrl(value: unknown, baseUrl: string): string | null {
  const raw = str(value);
  if (!raw || raw.length > MAX_URL) return null;
  try {
    const url = new URL(raw, `${baseUrl}/`);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
    if (url.username || url.password) return null;
    return url.toString();
  } catch {
    return null;
  }
}

/** Swagger 2's flow names to OpenAPI 3's. */
const SWAGGER2_FLOWS: Record<string, string> = { accessCode: 'authorizationCode', application: 'clientCredentials', implicit: 'implicit' };

/**
 * The description's OAuth 2 flows and scopes, merged over all its OAuth 2 schemes (Google's declare
 * an implicit scheme and an authorization code one with the same scopes): the first scheme that
 * declares a flow gives its URLs. The password flow is dropped (RFC 9700 says it must not be used).
 * Null when no OAuth 2 scheme declares a usable flow.
 */
export function oauthOf(spec: Obj, baseUrl: string): ApiOAuth | null {
  const schemes = securitySchemes(spec);
  const flows: ApiOAuth['flows'] = {};
  const scopes: Record<string, string> = {};
  let declared = false;
  for (const name of oauthSchemeNames(spec, schemes)) {
    const scheme = obj(schemes[name]);
    declared = true;
    // OpenAPI 3 `flows`; Swagger 2 puts one flow's fields on the scheme itself.
    const entries: [string, Obj][] = Object.keys(obj(scheme.flows)).length
      ? Object.entries(obj(scheme.flows)).map(([k, v]) => [k, obj(v)])
      : str(scheme.flow) && SWAGGER2_FLOWS[str(scheme.flow)!]
        ? [[SWAGGER2_FLOWS[str(scheme.flow)!]!, scheme]]
        : [];
    for (const [kind, flow] of entries) {
      const authorizationUrl = absoluteUrl(flow.authorizationUrl, baseUrl);
      const tokenUrl = absoluteUrl(flow.tokenUrl, baseUrl);
      const refreshUrl = absoluteUrl(flow.refreshUrl, baseUrl);
      const refresh = refreshUrl ? { refreshUrl } : {};
      if (kind === 'authorizationCode' && authorizationUrl && tokenUrl) flows.authorizationCode ??= { authorizationUrl, tokenUrl, ...refresh };
      else if (kind === 'clientCredentials' && tokenUrl) flows.clientCredentials ??= { tokenUrl, ...refresh };
      else if (kind === 'implicit' && authorizationUrl) flows.implicit ??= { authorizationUrl };
      else continue;
      for (const [scope, description] of Object.entries(obj(flow.scopes))) {
        const key = scope.trim();
        if (!key || key.length > MAX_SCOPE_NAME || key in scopes || Object.keys(scopes).length >= MAX_API_SCOPES) continue;
        scopes[key] = plainText(description, MAX_SCOPE_DESCRIPTION);
      }
    }
  }
  if (!declared || (!flows.authorizationCode && !flows.clientCredentials && !flows.implicit)) return null;
  const parsed = apiOAuthSchema.safeParse({ flows, scopes });
  return parsed.success ? parsed.data : null;
}

/** Reserved names (RFC 2606, RFC 6761) and the documentation domains: placeholders in descriptions. */
const PLACEHOLDER_SUFFIXES = ['.example', '.test', '.invalid', '.localhost', '.local', '.internal'];
const PLACEHOLDER_DOMAINS = ['example.com', 'example.net', 'example.org', 'localhost'];
const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Whether a host named in a public description cannot be a real authorization server: a reserved or
 * documentation name (`authserver.example`, `keycloak.example.com`), an IP address, a name with
 * characters no DNS host has (`your_customer_id.auth...`, template braces), or a single label.
 */
export function isPlaceholderHost(host: string): boolean {
  const name = host.toLowerCase().replace(/:\d+$/, '');
  if (isIP(name.replace(/^\[|\]$/g, '')) !== 0) return true;
  const labels = name.split('.');
  if (labels.length < 2 || !labels.every((l) => HOST_LABEL.test(l))) return true;
  if (PLACEHOLDER_SUFFIXES.some((s) => name.endsWith(s))) return true;
  return PLACEHOLDER_DOMAINS.some((d) => name === d || name.endsWith(`.${d}`));
}

/**
 * Who issues an API's tokens: the lower-case host (with its port, if any) of the authorization URL
 * (authorization code, else implicit), else of the client credentials token URL. One OAuth app
 * registered for this key serves every API with it (docs/decisions/oauth-provider-key.md).
 * With `rejectPlaceholders` (imported descriptions), a placeholder host gives null: the API keeps
 * its flows but cannot be connected.
 */
export function oauthProviderOf(oauth: ApiOAuth | null, options: { rejectPlaceholders: boolean }): string | null {
  if (!oauth) return null;
  const url = oauth.flows.authorizationCode?.authorizationUrl ?? oauth.flows.implicit?.authorizationUrl ?? oauth.flows.clientCredentials?.tokenUrl;
  if (!url) return null;
  let host: string;
  try {
    host = new URL(url).host.toLowerCase();
  } catch {
    return null;
  }
  if (!host || (options.rejectPlaceholders && isPlaceholderHost(host))) return null;
  return host;
}

/**
 * The OAuth scopes an operation declares (its own `security`, else the description's), over every
 * alternative requirement, in order and without repeats. Alternatives mean any one is enough: Google
 * lists each scope that grants an operation as an alternative of its own. Null when it names none.
 */
export function operationScopes(spec: Obj, operation: Obj, oauthSchemes: ReadonlySet<string>): string[] | null {
  if (oauthSchemes.size === 0) return null;
  const requirements = Array.isArray(operation.security) ? operation.security : Array.isArray(spec.security) ? spec.security : [];
  const scopes = new Set<string>();
  for (const requirement of requirements) {
    for (const [scheme, list] of Object.entries(obj(requirement))) {
      if (!oauthSchemes.has(scheme) || !Array.isArray(list)) continue;
      for (const scope of list) {
        if (typeof scope !== 'string' || !scope.trim() || scope.length > MAX_SCOPE_NAME) continue;
        if (scopes.size >= MAX_ENDPOINT_SCOPES) break;
        scopes.add(scope.trim());
      }
    }
  }
  return scopes.size ? [...scopes] : null;
}

/** The OAuth 2 schemes' names of a description (what `operationScopes` looks for). */
export function oauthSchemeSet(spec: Obj): Set<string> {
  return new Set(oauthSchemeNames(spec, securitySchemes(spec)));
}

/** Hosts of standards and encyclopaedias that scheme descriptions cite: never where a key is got. */
const REFERENCE_HOSTS =
  /(^|\.)(ietf\.org|rfc-editor\.org|wikipedia\.org|oauth\.net|oauth\.com|openid\.net|swagger\.io|openapis\.org|jwt\.io|w3\.org|learning\.postman\.com)$/;

/** An https address fit to show as documentation: no credentials, no placeholder or reference host, not too long. */
function docsUrl(value: unknown): string | null {
  const raw = str(value)?.replace(/[).,;:!?'"\]>]+$/, '');
  if (!raw || raw.length > 500) return null;
  try {
    const url = new URL(raw);
    if (url.protocol !== 'https:' || url.username || url.password || isPlaceholderHost(url.host) || REFERENCE_HOSTS.test(url.hostname)) return null;
    return url.toString();
  } catch {
    return null;
  }
}

/**
 * Links of a markdown/HTML text, each with its words (the link text and the address's): `[text](url)`, `<a href="url">text</a>`
 * and, with `bare`, plain https addresses. Code (fenced or inline) is left out: its addresses are
 * examples of calls, not documentation.
 */
function linksOf(input: string, bare: boolean): { url: string; words: string }[] {
  const text = input.replace(/```[\s\S]*?```/g, ' ').replace(/`[^`\n]*`/g, ' ');
  const links: { url: string; words: string }[] = [];
  const pattern =
    /\[([^\]]{0,200})\]\((\S{1,600}?)\)|<a\s[^>]{0,300}?href=["']([^"']{1,600})["'][^>]{0,300}>([\s\S]{0,200}?)<\/a>|(https:\/\/[^\s<>()"'\]]{1,600})/gi;
  for (const m of text.matchAll(pattern)) {
    if (m[5] && !bare) continue;
    const url = m[2] ?? m[3] ?? m[5] ?? '';
    links.push({ url, words: `${m[1] ?? m[4] ?? ''} ${url.replace(/[/_.?=&-]+/g, ' ')}` });
  }
  return links;
}

/** Words of a link (its text or address) that say it is where a caller gets credentials. */
const KEY_WORDS =
  /\b(api[ _-]?keys?|keys?|tokens?|sign[ -]?up|register|registration|credentials?|account|developer (portal|console)|console|dashboard|subscribe)\b/i;

/**
 * Where a caller gets a key of their own, for an API that needs one: the first https link of, in
 * order, `info.x-apiClientRegistration` (the catalog's own "register a client" link), the
 * description of the security scheme the API uses (then of its other schemes), the API's
 * description where a link's text or address (not a bare address, not code) speaks of keys, sign-up, registration or
 * credentials,
 * `externalDocs.url`, and `info.contact.url`. `info.x-origin` (where the catalog got the
 * description) is never used. Null for an API that needs no key, or when none is found.
 */
export function keyDocsUrlOf(spec: Obj, authScheme: AuthScheme): string | null {
  if (authScheme.type === 'none') return null;
  const info = obj(spec.info);
  const candidates: (string | null)[] = [docsUrl(obj(info['x-apiClientRegistration']).url)];
  const schemes = securitySchemes(spec);
  const chosen = chosenSchemeName(spec, schemes);
  const names = chosen ? [chosen, ...Object.keys(schemes).filter((n) => n !== chosen)] : [];
  for (const name of names) {
    const description = str(obj(schemes[name]).description);
    if (description) candidates.push(...linksOf(description, true).map((l) => docsUrl(l.url)));
  }
  const description = str(info.description);
  if (description)
    candidates.push(
      ...linksOf(description.slice(0, 20_000), false)
        .filter((l) => KEY_WORDS.test(l.words))
        .map((l) => docsUrl(l.url)),
    );
  candidates.push(docsUrl(obj(spec.externalDocs).url), docsUrl(obj(info.contact).url));
  return candidates.find((c) => c !== null) ?? null;
}
