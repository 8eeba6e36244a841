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
 * Which door the instructions are read through: `rest` (HTTP, curl examples, headers) or `mcp`
 * (the call_api tool and its arguments; no route, header or curl is named).
 */
export type InstructionsDoor = 'rest' | 'mcp';

/** What a tool caller does about a state that is not ready (the callability hint names REST routes). */
function mcpStateAdvice(apiId: string, callability: Callability): string | undefined {
  const ask = `ask a person to connect it with request_connection (apiId: "${apiId}", purpose: what you want to do and why), then wait with get_connection_request until it is connected`;
  switch (callability.state) {
    case 'ready':
      return READY_WORDS[callability.reason];
    case 'needs_key':
      return `It needs a key of your account's own, which a person connects in the dashboard (Connections): ${ask}.`;
    case 'needs_oauth':
      return `It needs an OAuth connection, which a person makes in the dashboard (sign-in and consent at ${callability.provider ?? 'the provider'}): ${ask}.`;
    case 'unavailable':
      return callability.reason === 'key_not_allowed'
        ? "This agent key's allow-list leaves it out; the account's owner can issue a key that allows it."
        : callability.hint;
  }
}

/**
 * The live "How to call it now" section: the API's state for the caller reading the instructions,
 * computed when they are served (the stored instructions are the same for every caller).
 */
export function callabilityInstructions(apiId: string, callability: Callability, door: InstructionsDoor = 'rest'): string {
  const lines = [
    '',
    '## How to call it now',
    '',
    `State for you: **${callability.state}** (\`${callability.reason}\`): ${STATE_WORDS[callability.state]}.`,
  ];
  const detail =
    door === 'mcp' ? mcpStateAdvice(apiId, callability) : callability.state === 'ready' ? READY_WORDS[callability.reason] : callability.hint;
  if (detail) lines.push('', detail);
  if (callability.keyDocsUrl) lines.push('', `Where to get a key: ${callability.keyDocsUrl}`);
  lines.push(
    '',
    door === 'mcp'
      ? `get_api (id: "${apiId}") answers the same \`callability\` object; search_apis or discover_apis with callable: true list what you can call now.`
      : `\`GET /api/v1/apis/${apiId}\` answers the same \`callability\` object; \`GET /api/v1/apis?callable=true\` lists what you can call now.`,
  );
  return lines.join('\n') + '\n';
}

/** A per-path price as the footer states it (micro-dollars, as the proxy prices by). */
export interface InstructionsPriceRule {
  method: string;
  path: string;
  priceMicros: bigint;
}

/** What the footer prices: the API's price, its bring-your-own-key price and its per-path rules. */
export interface InstructionsPrices {
  priceMicros: bigint;
  byokPriceMicros: bigint | null;
  rules: readonly InstructionsPriceRule[];
}

/** The "Price" section's lines: the default price and each per-path rule, in the order they are tried. */
function priceLines(apiId: string, prices: InstructionsPrices, door: InstructionsDoor): string[] {
  const { priceMicros, byokPriceMicros, rules } = prices;
  const byok =
    byokPriceMicros !== null && byokPriceMicros !== priceMicros ? ` ($${formatDollars(byokPriceMicros)} when you connect your own key)` : '';
  const perCall =
    door === 'mcp'
      ? `Each call_api call costs $${formatDollars(priceMicros)}${byok}${rules.length ? ', unless a rule below matches' : ''}, debited from your prepaid balance (get_balance) before it is forwarded; the result's \`cost\`, \`balance\` and \`chargeId\` say what was charged. Pass \`maxCost\` (dollars) to refuse a call above a price: it is answered 409 \`max_cost_exceeded\` and nothing is charged.`
      : `Each proxied call costs $${formatDollars(priceMicros)}${byok}${rules.length ? ', unless a rule below matches' : ''}, debited from your prepaid balance; every charged response carries \`X-Service-Cost\`, \`X-Service-Balance\` and \`X-Service-Api: ${apiId}\`. Send \`X-Max-Cost\` to refuse calls above a price (409 \`max_cost_exceeded\`, nothing charged).`;
  const lines = ['', '## Price', '', perCall];
  if (rules.length > 0) {
    lines.push(
      '',
      'Per-path prices (the first rule matching the method and the path under the base URL applies; a trailing `*` matches every path under it; letter case, a trailing slash and a format suffix such as `.json` do not change the match):',
      '',
      ...rules.map((rule) => `- \`${rule.method} ${rule.path}\`: $${formatDollars(rule.priceMicros)} per call`),
    );
  }
  return lines;
}

/**
 * The live sections appended by the edge: price (with the per-path rules) and errors (what the
 * caller can do now is callabilityInstructions). `connection_required` is listed only for an API the
 * caller cannot call yet: for one that needs no credentials, it would contradict "How to call it now".
 */
export function instructionsFooter(apiId: string, prices: InstructionsPrices, callability: Callability, door: InstructionsDoor = 'rest'): string {
  const notReady = callability.state !== 'ready';
  const errors =
    door === 'mcp'
      ? [
          "A refused call is a tool error (`isError`) whose text is the platform's error: `status`, `code`, `error` and a `hint`.",
          '',
          '- `402` `insufficient_balance`: the balance is below the price; the error carries `balance` and `cost`. A person adds funds in the dashboard.',
          '- `409` `max_cost_exceeded`: the price is above your `maxCost`; nothing was charged. Raise `maxCost` or leave it out to accept the price.',
          ...(notReady ? ['- `409` `connection_required`: the API needs your own key or an OAuth connection first (see "How to call it now").'] : []),
          '- `403` `api_not_allowed`: this agent key may not call this API.',
          '- `429` `rate_limited`: too many calls; wait `retryAfter` seconds.',
          "- `502` / `503`: the upstream failed or is unavailable; the call is refunded (the error's hint says so).",
          "- Any other status is the upstream's own answer, returned as the result's `status`, `headers` and `body`.",
          '',
        ]
      : [
          '- `401` / `403`: missing, unknown, disabled or revoked platform key, or an agent key not allowed to use this API.',
          '- `402`: balance below the price; the body carries `balance` and `cost`. Add funds with `POST /api/v1/balance` or pay with x402.',
          `- \`404\`: unknown API id (check \`GET /api/v1/apis/${apiId}\`).`,
          ...(notReady ? ['- `409` `connection_required`: the API needs your own key or an OAuth connection first (see "How to call it now").'] : []),
          '- `409` `max_cost_exceeded`: the price is above your `X-Max-Cost`; nothing was charged.',
          '- `429`: too many requests; wait `Retry-After` seconds.',
          '- `502`: the upstream API answered with an error; the body carries it and the call is refunded.',
          '- `503`: the upstream API is temporarily unavailable; retry after a short delay (refunded).',
          '',
        ];
  return [...priceLines(apiId, prices, door), '', '## Errors to expect', '', ...errors].join('\n');
}

/** Upstream authentication as a tool caller reads it: the proxy adds the key, a person connects it. */
function mcpAuthText(scheme: AuthScheme, callability: Callability): string {
  if (scheme.type === 'none') return 'The upstream API needs no credentials; call_api needs nothing but its arguments.';
  const how =
    scheme.type === 'apiKey'
      ? `an API key in the ${scheme.in} \`${scheme.name}\``
      : scheme.type === 'bearer'
        ? 'a bearer token'
        : scheme.type === 'basic'
          ? 'HTTP Basic credentials'
          : 'OAuth 2 access tokens';
  const who =
    callability.state === 'ready'
      ? ` ${READY_WORDS[callability.reason] ?? 'The proxy adds the credentials.'}`
      : ' The proxy adds the key your account connected (or an OAuth connection\'s token, or the operator\'s key where one is configured): see "How to call it now".';
  return `The upstream API expects ${how}.${who} Never put an upstream key in \`headers\` yourself.`;
}

/** `call_api(...)` with these arguments, as a tool call is written in the instructions. */
function callApiExample(apiId: string, endpoint: { method: string; path: string } | undefined, query: string[]): string {
  const method = endpoint?.method ?? 'GET';
  const args: Record<string, unknown> = { apiId, method, path: (endpoint?.path ?? '/').replace(/\{([^}]+)\}/g, '<$1>') };
  if (query.length > 0) args.query = Object.fromEntries(query.map((name) => [name, `<${name}>`]));
  if (['POST', 'PUT', 'PATCH'].includes(method)) args.body = { '...': '...' };
  args.maxCost = 0.01;
  return `call_api ${JSON.stringify(args, null, 2)}`;
}

/**
 * The instructions as a tool caller reads them: the stored (or generated) REST text's sections
 * kept where they describe the API (what it does, its endpoints and their parameters, with paths
 * under the base URL), the rest rewritten for call_api: no curl, no proxy URL, no headers.
 */
export function mcpInstructions(stored: string, api: InstructionSource, callability: Callability): string {
  const prefix = proxyPath(api.id);
  const sections = stored.split(/\n(?=## )/);
  const out: string[] = [];
  for (const section of sections) {
    const title = /^## (.+)/.exec(section)?.[1]?.trim();
    if (title === 'How to call it') {
      out.push(
        [
          '## How to call it',
          '',
          `Call it with the call_api tool: \`call_api(apiId, method, path, query, body, maxCost)\` with apiId \`${api.id}\`. \`path\` is the path under the API's base URL (the endpoints below); query parameters go in \`query\`, never in \`path\`; a JSON \`body\` is sent as JSON, a text one as it is; \`headers\` carries extra upstream headers.`,
          "The result carries the upstream's `status`, `headers` and `body`, and what the call cost. The upstream's own rate limits and request id arrive as `x-upstream-ratelimit-*` and `x-upstream-request-id` in `headers`; a redirect on the API's own origin comes back as a path under the base URL, to call again with call_api.",
          '',
        ].join('\n'),
      );
    } else if (title === 'Upstream authentication') {
      out.push(`## Upstream authentication\n\n${mcpAuthText(api.authScheme, callability)}\n`);
    } else if (title === 'Main endpoints') {
      out.push(
        section
          .replace(/`([A-Z]+) \/api\/v1\/proxy\/[^/`]+\//g, '`$1 /')
          .replace(/`GET \/api\/v1\/apis\/[^`]+` lists them\./, `get_api (id: "${api.id}") lists them.`),
      );
    } else if (title === 'Example') {
      const first = api.endpoints.find((e) => e.method === 'GET') ?? api.endpoints[0];
      const params = first
        ? new RegExp(`\`${first.method} ${escapeRegExp(prefix)}${escapeRegExp(first.path.replace(/^\//, ''))}\`[^\n]*\n  Parameters: ([^\n]*)`).exec(
            stored,
          )
        : null;
      const query = [...(params?.[1] ?? '').matchAll(/`([^`]+)` \(query, required\)/g)].map((m) => m[1]!);
      out.push(`## Example\n\n\`\`\`json\n${callApiExample(api.id, first, query)}\n\`\`\`\n`);
    } else {
      out.push(section.endsWith('\n') ? section : `${section}\n`);
    }
  }
  return out.join('\n');
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
