/**
 * Text helpers of the directory: plain text out of the markdown/HTML found in OpenAPI descriptions,
 * and the agent-readable instructions generated for each API.
 */
import type { AuthScheme } from '#contracts/auth-scheme';
import { formatDollars } from '#contracts/money';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', '#39': "'" };

/** Markdown and HTML to one line of plain text, cut at `max` characters on a word boundary. */
export function plainText(input: unknown, max = 2000): string {
  if (typeof input !== 'string') return '';
  let text = input
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<[^>]{0,500}>/g, ' ')
    .replace(
      /&([a-z]+|#\d+);/gi,
      (whole, name: string) => ENTITIES[name.toLowerCase()] ?? (name.startsWith('#') ? String.fromCharCode(Number(name.slice(1))) : whole),
    )
    .replace(/```[\s\S]*?```/g, ' ')
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/^\s{0,3}#{1,6}\s*/gm, '')
    .replace(/^\s*[-*+>]\s+/gm, '')
    .replace(/(\*\*|__)(.*?)\1/g, '$2')
    .replace(/(^|\W)[*_]([^*_\n]+)[*_](?=\W|$)/g, '$1$2')
    .replace(/\|/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (text.length > max) {
    const cut = text.slice(0, max - 1);
    const space = cut.lastIndexOf(' ');
    text = `${space > max * 0.6 ? cut.slice(0, space) : cut}…`;
  }
  return text;
}

export type { AuthScheme } from '#contracts/auth-scheme';

export interface EndpointParam {
  name: string;
  in: string;
  required: boolean;
  description: string;
}

export interface IndexedEndpoint {
  method: string;
  path: string;
  summary: string;
  params?: EndpointParam[];
}

export interface InstructionSource {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  description: string;
  /** Null when it is not to be published (an operator-registered API's upstream may be a private host). */
  baseUrl: string | null;
  authScheme: AuthScheme;
  categories: string[];
  endpoints: IndexedEndpoint[];
  endpointCount: number;
}

export const proxyPath = (apiId: string) => `/api/v1/proxy/${apiId}/`;

function authText(apiId: string, scheme: AuthScheme): string {
  const connect = `Connect your own key once with \`POST /api/v1/connect/${apiId}\` and body \`{"apiKey": "<your ${apiId} key>"}\`; the proxy then adds it to every call`;
  switch (scheme.type) {
    case 'none':
      return 'The upstream API needs no credentials. Send only your platform key (`Authorization: Bearer service_sk_...` or `X-API-Key`).';
    case 'apiKey':
      return `The upstream API expects an API key in the ${scheme.in} \`${scheme.name}\`. ${connect} in that ${scheme.in}, or uses the platform's own key where the operator configured one. Do not send the upstream key yourself.`;
    case 'bearer':
      return `The upstream API expects \`Authorization: Bearer <token>\`. ${connect} as the bearer token, or uses the platform's key where configured.`;
    case 'basic':
      return `The upstream API uses HTTP Basic auth. ${connect} (as \`user:password\`) as Basic credentials, or uses the platform's key where configured.`;
    case 'oauth2':
      return `The upstream API uses OAuth 2. Obtain an access token from the provider and ${connect[0]!.toLowerCase()}${connect.slice(1)} as a bearer token, or uses the platform's key where configured.`;
  }
}

function exampleCurl(apiId: string, endpoint: IndexedEndpoint | undefined): string {
  const path = (endpoint?.path ?? '/').replace(/\{([^}]+)\}/g, '<$1>').replace(/^\//, '');
  const method = endpoint?.method ?? 'GET';
  const query = (endpoint?.params ?? []).filter((p) => p.in === 'query' && p.required).map((p) => `${p.name}=<${p.name}>`);
  const url = `$BASE_URL${proxyPath(apiId)}${path}${query.length ? `?${query.join('&')}` : ''}`;
  const lines = [`curl -X ${method} "${url}" \\`, '  -H "Authorization: Bearer $SERVICE_API_KEY"'];
  if (['POST', 'PUT', 'PATCH'].includes(method)) {
    lines[lines.length - 1] += ' \\';
    lines.push('  -H "Content-Type: application/json" -d \'{ ... }\'');
  }
  return lines.join('\n');
}

/**
 * Agent-readable markdown for one API, without the price (the edge adds the live price, since an
 * operator may change it after indexing).
 */
export function generateInstructions(api: InstructionSource): string {
  const main = api.endpoints.slice(0, 12);
  const endpointLines = main.map((e) => {
    const params = (e.params ?? []).slice(0, 8).map((p) => `\`${p.name}\` (${p.in}${p.required ? ', required' : ''})`);
    return `- \`${e.method} ${proxyPath(api.id)}${e.path.replace(/^\//, '')}\`${e.summary ? ` — ${e.summary}` : ''}${params.length ? `\n  Parameters: ${params.join(', ')}` : ''}`;
  });
  const more =
    api.endpointCount > main.length ? `\n\n${api.endpointCount - main.length} more endpoints: \`GET /api/v1/apis/${api.id}\` lists them.` : '';
  return [
    `# ${api.name}`,
    '',
    `API id: \`${api.id}\` · provider: ${api.provider}${api.service ? ` · service: ${api.service}` : ''}${api.categories.length ? ` · categories: ${api.categories.join(', ')}` : ''}`,
    '',
    '## What it does',
    '',
    api.description || `${api.name} from ${api.provider}.`,
    '',
    '## How to call it',
    '',
    `Call every endpoint through the platform's metered proxy: \`${proxyPath(api.id)}{path}\` under the platform's base URL.`,
    `The proxy forwards the method, path remainder, query and body unchanged to ${api.baseUrl === null ? "the API's upstream" : `\`${api.baseUrl}\``} and returns the upstream response.`,
    'Authenticate to the platform with `Authorization: Bearer service_sk_...` (or `X-API-Key`).',
    '',
    '## Upstream authentication',
    '',
    authText(api.id, api.authScheme),
    '',
    '## Main endpoints',
    '',
    endpointLines.length ? endpointLines.join('\n') + more : 'The description lists no endpoints; see the provider documentation.',
    '',
    '## Example',
    '',
    '```sh',
    exampleCurl(api.id, main.find((e) => e.method === 'GET') ?? main[0]),
    '```',
  ].join('\n');
}

/** The live sections appended by the edge: price and errors. */
export function instructionsFooter(apiId: string, priceMicros: bigint, byokPriceMicros: bigint | null, platformKey: boolean): string {
  const byok =
    byokPriceMicros !== null && byokPriceMicros !== priceMicros ? ` ($${formatDollars(byokPriceMicros)} when you connect your own key)` : '';
  return [
    '',
    '## Price',
    '',
    `Each proxied call costs $${formatDollars(priceMicros)}${byok}, debited from your prepaid balance; every charged response carries \`X-Service-Cost\`, \`X-Service-Balance\` and \`X-Service-Api: ${apiId}\`. Send \`X-Max-Cost\` to refuse calls above a price.`,
    platformKey
      ? 'A platform key is configured for this API: you can call it without connecting your own key.'
      : 'No platform key is configured for this API: connect your own key first.',
    '',
    '## Errors to expect',
    '',
    '- `401` / `403`: missing, unknown, disabled or revoked platform key, or an agent key not allowed to use this API.',
    '- `402`: balance below the price; the body carries `balance` and `cost`. Add funds with `POST /api/v1/balance` or pay with x402.',
    `- \`404\`: unknown API id (check \`GET /api/v1/apis/${apiId}\`).`,
    '- `429`: too many requests; wait `Retry-After` seconds.',
    '- `502`: the upstream API answered with an error; the body carries it and the call is refunded.',
    '- `503`: the upstream API is temporarily unavailable; retry after a short delay (refunded).',
    '',
  ].join('\n');
}
