/**
 * Text helpers of the directory: plain text out of the markdown/HTML found in OpenAPI descriptions,
 * and the agent-readable instructions generated for each API.
 */
import type { AuthScheme } from '#contracts/auth-scheme';
import type { Callability } from '#contracts/directory';
import { formatDollars } from '#contracts/money';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', '#39': "'" };

/** Markdown and HTML to one line of plain text, cut at `max` characters on a word boundary. */
export function plainText(input: unknown, max = 2000): string {
  if (typeof input !== 'string') return '';
  const text = input
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
  return cutAtWord(text, max);
}

/** Characters of a description an API's summary shows (lists, search and discovery); its detail shows all. */
export const SUMMARY_DESCRIPTION_LENGTH = 300;

/**
 * `text` when it fits in `max` characters, else cut on the last word boundary before (a word longer
 * than 40 % of `max` is cut inside) with an ellipsis, the whole at most `max` characters.
 */
export function cutAtWord(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max - 1);
  const space = cut.search(/\s\S*$/);
  return `${(space > max * 0.6 ? cut.slice(0, space) : cut).replace(/[\s,;:([{-]+$/, '')}…`;
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
  /** The OAuth scopes the operation declares (any one alternative may be enough); absent when it names none. */
  scopes?: string[];
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
      return (
        "The upstream API uses OAuth 2. Where an OAuth app is registered for its provider, a person connects it once from the dashboard's Connections page (sign-in and consent at the provider) and the proxy then sends the connection's access token, refreshed as needed; an agent can ask a person to connect with `POST /api/v1/connect/" +
        apiId +
        '/request`. "How to call it now" below says what applies to you.'
      );
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

const STATE_WORDS: Record<Callability['state'], string> = {
  ready: 'ready: you can call it now',
  needs_key: 'needs your key: connect your own key before calling it',
  needs_oauth: 'needs an OAuth connection: connect it (or have a person connect it) before calling it',
  unavailable: 'unavailable: it cannot be called through the platform for you',
};
const READY_WORDS: Partial<Record<Callability['reason'], string>> = {
  no_auth: 'The upstream needs no credentials.',
  platform_key: "The proxy uses the operator's platform key.",
  own_key: 'The proxy uses the key you connected.',
  oauth_connection: 'The proxy uses your OAuth connection (refreshed as needed).',
};

/**
 * The live "How to call it now" section: the API's state for the caller reading the instructions,
 * computed when they are served (the stored instructions are the same for every caller).
 */
export function callabilityInstructions(apiId: string, callability: Callability): string {
  const lines = [
    '',
    '## How to call it now',
    '',
    `State for you: **${callability.state}** (\`${callability.reason}\`): ${STATE_WORDS[callability.state]}.`,
  ];
  const detail = callability.state === 'ready' ? READY_WORDS[callability.reason] : callability.hint;
  if (detail) lines.push('', detail);
  if (callability.keyDocsUrl) lines.push('', `Where to get a key: ${callability.keyDocsUrl}`);
  lines.push(
    '',
    `\`GET /api/v1/apis/${apiId}\` answers the same \`callability\` object; \`GET /api/v1/apis?callable=true\` lists what you can call now.`,
  );
  return lines.join('\n') + '\n';
}

/** The live sections appended by the edge: price and errors (what the caller can do now is callabilityInstructions). */
export function instructionsFooter(apiId: string, priceMicros: bigint, byokPriceMicros: bigint | null): string {
  const byok =
    byokPriceMicros !== null && byokPriceMicros !== priceMicros ? ` ($${formatDollars(byokPriceMicros)} when you connect your own key)` : '';
  return [
    '',
    '## Price',
    '',
    `Each proxied call costs $${formatDollars(priceMicros)}${byok}, debited from your prepaid balance; every charged response carries \`X-Service-Cost\`, \`X-Service-Balance\` and \`X-Service-Api: ${apiId}\`. Send \`X-Max-Cost\` to refuse calls above a price.`,
    '',
    '## Errors to expect',
    '',
    '- `401` / `403`: missing, unknown, disabled or revoked platform key, or an agent key not allowed to use this API.',
    '- `402`: balance below the price; the body carries `balance` and `cost`. Add funds with `POST /api/v1/balance` or pay with x402.',
    `- \`404\`: unknown API id (check \`GET /api/v1/apis/${apiId}\`).`,
    '- `409` `connection_required`: the API needs your own key or an OAuth connection first (see "How to call it now").',
    '- `429`: too many requests; wait `Retry-After` seconds.',
    '- `502`: the upstream API answered with an error; the body carries it and the call is refunded.',
    '- `503`: the upstream API is temporarily unavailable; retry after a short delay (refunded).',
    '',
  ].join('\n');
}
