import type { PlatformError } from '#core/platform';
import { ROUTE_TOOLS } from './tools.js';

/**
 * A refusal as a tool caller reads it. The operations' errors are written for REST callers ("Search
 * with GET /api/v1/apis?q=...", "Raise X-Max-Cost"); over MCP they name tools and their arguments:
 * - an error that carries its own tool wording (PlatformError.tool) is told that way;
 * - otherwise each route reference (`GET /api/v1/cookbooks/sessions/abc/step`, with its query and a
 *   JSON body) becomes the tool that runs that route, with its arguments
 *   (`get_current_step (sessionId: "abc")`), read from the same table the tools are built from;
 *   a proxy path becomes `call_api (apiId: "...")`; `Retry-After` becomes the error's `retryAfter`.
 * A reference to a route no tool runs is left as it is; test/edge/mcp-words.test.ts walks every tool
 * error path and fails on one.
 */

interface RouteRef {
  tool: string;
  method: string;
  pattern: RegExp;
  params: string[];
}

/** Route query names a tool calls otherwise (discover_apis takes `query`, its route also `q`). */
const ARG_ALIASES: Record<string, Record<string, string>> = { discover_apis: { q: 'query' } };

const ROUTES: RouteRef[] = ROUTE_TOOLS.map((tool) => {
  const params: string[] = [];
  const source = tool.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:(\w+)/g, (_match, name: string) => {
    params.push(name);
    return '([^/?#]+)';
  });
  return { tool: tool.name, method: tool.method, pattern: new RegExp(`^${source}$`), params };
  // A static segment wins over a parameter, as in the router: /cookbooks/sessions is list_sessions, not get_cookbook.
}).sort((a, b) => a.params.length - b.params.length);

const PROXY = /^\/api\/v1\/proxy\/([^/?#\s]+)/;

/** `name (a: "x", b: true)`: a tool call as hints write it. */
function toolCall(name: string, args: [string, string][]): string {
  if (args.length === 0) return name;
  const shown = args.map(([arg, value]) => `${arg}: ${/^(true|false|\d+)$/.test(value) ? value : JSON.stringify(value)}`);
  return `${name} (${shown.join(', ')})`;
}

/** The tool call a REST reference stands for, or null when no tool runs that route. */
function toolFor(method: string | undefined, target: string, body: string | undefined): string | null {
  const proxied = PROXY.exec(target);
  if (proxied) return toolCall('call_api', [['apiId', proxied[1]!]]);
  if (method === undefined) return null;
  const at = target.indexOf('?');
  const path = at === -1 ? target : target.slice(0, at);
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const match = route.pattern.exec(path);
    if (!match) continue;
    const aliases = ARG_ALIASES[route.tool] ?? {};
    const args: [string, string][] = route.params.map((name, i) => [name, decodeURIComponent(match[i + 1]!)]);
    if (at !== -1) {
      for (const [name, value] of new URLSearchParams(target.slice(at + 1))) args.push([aliases[name] ?? name, value]);
    }
    if (body !== undefined) {
      try {
        for (const [name, value] of Object.entries(JSON.parse(body) as Record<string, unknown>)) args.push([name, String(value)]);
      } catch {
        // A body written with placeholders ({"apiKey": "..."} is JSON; `{ ... }` is not): the tool's name still says it.
      }
    }
    return toolCall(route.tool, args);
  }
  return null;
}

/** A route reference in prose: an optional method, the route under /api/v1 (with its query), an optional JSON body. */
const REFERENCE = /(?:\b(GET|POST|PUT|PATCH|DELETE) )?(\/api\/v1\/[^\s"'`,;)]+)(?: (\{[^{}]*\}))?/g;

/** The text with its route references and header words told as tools and arguments. */
export function toolText(text: string): string {
  return (
    text
      .replace(REFERENCE, (whole, method: string | undefined, target: string, body: string | undefined) => {
        // A sentence's full stop is not part of the path; an ellipsis (`?q=...`) is.
        const trailing = target.endsWith('.') && (!target.endsWith('...') || target.endsWith('....')) ? '.' : '';
        const reference = trailing ? target.slice(0, -1) : target;
        const tool = toolFor(method, reference, body);
        return tool === null ? whole : `${tool}${trailing}`;
      })
      // A REST hint's aside for MCP callers is the whole of it here.
      .replace(/ \(MCP: [a-z_]+\)/g, '')
      .replace(/the number of seconds in Retry-After/g, 'retryAfter seconds')
      .replace(/\(Retry-After\)/g, '(retryAfter)')
  );
}

/** The error's `error` and `hint` as a tool caller reads them. */
export function toolWording(error: PlatformError): { error: string; hint: string | undefined } {
  const hint = error.tool?.hint ?? error.hint;
  return { error: toolText(error.tool?.error ?? error.message), hint: hint === undefined ? undefined : toolText(hint) };
}
