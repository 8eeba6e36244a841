import { Readable } from 'node:stream';
import { routeOf } from '../http/route-options.js';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createMcpHandler, validateOriginHeader, type AuthInfo } from '@modelcontextprotocol/server';
import { PlatformError } from '#core/platform';
import type { Caller } from '#core/identity';
import type { EdgeSettings } from '../config.js';
import { presentedKey, requireAuth } from '../plugins/auth.js';
import { authorizationServerUrls, MCP_SCOPE } from '../oauth2/provider.js';
import { buildMcpServer, MCP_PROFILES, SERVER_INFO, type McpProfile } from './server.js';
import type { ToolCaller } from './dispatch.js';

export const MCP_PATH = '/mcp';
const METADATA_PATH = '/.well-known/oauth-protected-resource';

const isToolCall = (message: unknown) => (message as { method?: unknown } | null | undefined)?.method === 'tools/call';

/** The tool profile the client connected with (`/mcp?profile=calls`), `full` without one; null for an unknown one. */
function profileOf(request: FastifyRequest): McpProfile | null {
  const asked = (request.query as Record<string, unknown> | undefined)?.profile;
  if (asked === undefined || asked === '') return 'full';
  return (MCP_PROFILES as readonly unknown[]).includes(asked) ? (asked as McpProfile) : null;
}

/** A refused profile, as a JSON-RPC error every MCP client can read (HTTP 400 kept). */
function unknownProfile(reply: FastifyReply): FastifyReply {
  const error = 'profile must be one of: ' + MCP_PROFILES.join(', ');
  const hint = 'Connect to /mcp for every tool, or /mcp?profile=calls for the lean set (discovery, get_api, call_api, balance, connection requests).';
  return reply
    .code(400)
    .type('application/json; charset=utf-8')
    .send({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32602,
        message: `validation_failed: ${error} (${hint})`,
        data: { status: 400, ok: false, code: 'validation_failed', error, hint },
      },
    });
}

/** Where the protected-resource metadata of the MCP endpoint lives (RFC 9728, path-aware). */
export const resourceMetadataUrl = (settings: EdgeSettings) => new URL(`${METADATA_PATH}${MCP_PATH}`, settings.PUBLIC_URL).toString();

/**
 * The MCP specification's defence against DNS rebinding: a browser request to /mcp from an origin
 * that is not ours gets 403 before anything else runs (authentication included). Clients that are
 * not browsers send no Origin and pass.
 */
export function mcpOriginGuard(settings: EdgeSettings) {
  const allowed = [new URL(settings.PUBLIC_URL).hostname.toLowerCase(), ...settings.MCP_ALLOWED_ORIGINS];
  // With `done`, not async: it runs on every request, and every other route passes at once.
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    // By the route matched, not the URL's text: the router also takes `/%6Dcp` for /mcp.
    if (routeOf(request).url !== MCP_PATH) return done();
    const origin = request.headers.origin;
    const result = validateOriginHeader(Array.isArray(origin) ? origin[0] : origin, allowed);
    if (!result.ok) {
      return done(
        new PlatformError('forbidden', `Origin not allowed: ${result.message}`, {
          hint: 'Browsers may call the MCP endpoint only from the site itself or an origin listed in MCP_ALLOWED_ORIGINS.',
        }),
      );
    }
    done();
  };
}

/** The protected-resource metadata (RFC 9728) of the MCP endpoint: what to send and where to get it. */
function protectedResourceMetadata(settings: EdgeSettings) {
  const site = settings.PUBLIC_URL.replace(/\/+$/, '');
  return {
    resource: `${site}${MCP_PATH}`,
    resource_name: SERVER_INFO.title,
    // The platform's own authorization server (oauth2/): MCP clients that speak OAuth sign in there.
    authorization_servers: [authorizationServerUrls(settings).issuer],
    scopes_supported: [MCP_SCOPE],
    bearer_methods_supported: ['header'],
    resource_documentation: `${site}/llms.txt`,
    // Or, without OAuth, the bearer token is a platform API key or agent key.
    'x-api-key': {
      scheme: 'Authorization: Bearer <key>',
      format: 'service_sk_ followed by 48 lowercase hex digits (an API key or an agent key)',
      obtain: `POST ${site}/api/v1/register answers an account with its first API key; agent keys are made with POST ${site}/api/v1/agent-keys or in the dashboard`,
      openapi: `${site}/api/v1/openapi.json`,
    },
  };
}

/** A Fastify request as the web-standard Request the MCP SDK serves. */
function toWebRequest(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : String(value));
  }
  const init: RequestInit = { method: request.method, headers };
  if (request.method === 'POST' && request.body !== undefined) init.body = JSON.stringify(request.body);
  return new Request(`http://${request.host || 'localhost'}${request.url}`, init);
}

async function sendWebResponse(reply: FastifyReply, response: Response): Promise<FastifyReply> {
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  if (!response.body) return reply.send();
  if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    return reply.send(Readable.fromWeb(response.body as NodeReadableStream));
  }
  return reply.send(Buffer.from(await response.arrayBuffer()));
}

/** Platform codes that mean the bearer token itself is no good (RFC 6750 `invalid_token`). */
const INVALID_TOKEN = new Set(['invalid_key', 'invalid_token', 'key_revoked', 'key_expired', 'key_disabled']);
/** The JSON-RPC error code of an authentication or authorization failure (implementation-defined range). */
export const JSONRPC_AUTH_ERROR = -32001;

/**
 * A 401 or 403 of the MCP endpoint, told the way every MCP client can read it: the HTTP status is
 * kept, `WWW-Authenticate` names the resource metadata (and `error="invalid_token"` when a token was
 * presented and is no good, as RFC 6750 says), and the body is a JSON-RPC error whose message starts
 * with the platform's code, with the platform's error body (code, error, hint) as its data.
 */
function authFailure(request: FastifyRequest, reply: FastifyReply, payload: unknown, challenge: string): string {
  let body: { code?: string; error?: string; hint?: string } = {};
  try {
    body = JSON.parse(typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '{}') as typeof body;
  } catch {
    // Not the platform's error body: the status still says what happened.
  }
  const code = typeof body.code === 'string' ? body.code : reply.statusCode === 401 ? 'missing_credentials' : 'forbidden';
  const quoted = (text: string) => text.replace(/["\\]/g, '').slice(0, 200);
  const params = INVALID_TOKEN.has(code) ? `, error="invalid_token", error_description="${quoted(body.error ?? code)}"` : '';
  if (reply.statusCode === 401 || params) reply.header('WWW-Authenticate', `${challenge}${params}`);
  // Authentication runs before the body is parsed: the id is then unknown, and JSON-RPC says null.
  const message = (request.body ?? null) as { id?: unknown } | null;
  const id = message && !Array.isArray(message) && (typeof message.id === 'string' || typeof message.id === 'number') ? message.id : null;
  const text = `${code}: ${body.error ?? 'Authentication failed'}${body.hint ? ` (${body.hint})` : ''}`;
  reply.type('application/json; charset=utf-8');
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: { code: JSONRPC_AUTH_ERROR, message: text, data: { status: reply.statusCode, ok: false, ...body, code } },
  });
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on the MCP route: its 401s carry the Bearer challenge naming the resource metadata. */
    bearerChallenge?: boolean;
  }
}

/**
 * The MCP endpoint (Streamable HTTP, 2026-07-28 revision, stateless; 2025-era clients are served
 * through the SDK's stateless fallback). Authenticated with the caller's API key or agent key as a
 * Bearer token; every tool runs what its REST route runs (mcp/tools.ts, mcp/dispatch.ts).
 */
export default fp(
  async function mcpPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const challenge = `Bearer resource_metadata="${resourceMetadataUrl(settings)}", scope="${MCP_SCOPE}"`;
    const handler = createMcpHandler(
      (context) => {
        const extra = context.authInfo?.extra as { caller: Caller; toolCaller: ToolCaller; profile: McpProfile } | undefined;
        if (!extra) throw new Error('MCP request without an authenticated caller');
        return buildMcpServer(app, extra.caller, extra.toolCaller, extra.profile);
      },
      {
        maxRequestBodySize: settings.BODY_LIMIT_BYTES,
        onerror: (error) => app.log.warn({ err: error }, 'MCP request refused or failed'),
      },
    );
    app.addHook('onClose', async () => handler.close());

    app.addHook('onSend', (request, reply, payload, done) => {
      if (reply.statusCode !== 401 && reply.statusCode !== 403) return done(null, payload);
      if (!routeOf(request).config.bearerChallenge) return done(null, payload);
      done(null, authFailure(request, reply, payload, challenge));
    });

    app.route({
      method: ['POST', 'GET', 'DELETE'],
      url: MCP_PATH,
      config: { auth: 'apiKey', bearerChallenge: true, oauthAccessTokens: true },
      schema: { hide: true },
      handler: async (request, reply) => {
        const caller = requireAuth(request);
        const key = presentedKey(request);
        if (key === null) throw new PlatformError('missing_credentials', 'Missing API key');
        const profile = profileOf(request);
        if (profile === null) return unknownProfile(reply);
        const toolCaller: ToolCaller = {
          requestId: request.id,
          // A tool call of a batch was counted with it (it spends the batch's pass); any other is counted now.
          limit: async () => {
            if (toolCaller.prepaid !== undefined && app.rateLimiter.usePrepaid(request, toolCaller.prepaid)) return;
            await app.rateLimiter.consumeCaller(request, reply);
          },
        };
        if (Array.isArray(request.body)) {
          // A batch: every message counts, all before any runs, so a batch past the budget is refused
          // whole (429). Its tool calls were counted here, so the calls they make are not counted again.
          const messages = request.body as unknown[];
          await app.rateLimiter.consumeCallerHits(request, reply, messages.length);
          const toolCalls = messages.filter(isToolCall).length;
          if (toolCalls > 0) toolCaller.prepaid = app.rateLimiter.prepay(request, toolCalls);
        } else if (!isToolCall(request.body)) {
          // A single tool call is counted by the call it makes (a refusal is then a tool error).
          await app.rateLimiter.consumeCaller(request, reply);
        }
        const authInfo: AuthInfo = { token: key, clientId: caller.keyId ?? caller.accountId, scopes: [], extra: { caller, toolCaller, profile } };
        return app.metrics.mcpRequest(async () =>
          sendWebResponse(reply, await handler.fetch(toWebRequest(request), { authInfo, parsedBody: request.body })),
        );
      },
    });

    const metadata = protectedResourceMetadata(settings);
    for (const url of [METADATA_PATH, `${METADATA_PATH}${MCP_PATH}`]) {
      app.get(url, { schema: { hide: true } }, async (_request, reply) => {
        reply.header('Access-Control-Allow-Origin', '*');
        reply.header('Cache-Control', 'public, max-age=3600');
        return metadata;
      });
    }
  },
  { name: 'mcp', dependencies: ['deps', 'auth', 'rate-limit', 'route-catalog', 'metrics'] },
);
