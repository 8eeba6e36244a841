import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { PlatformError } from '#core/platform';
import { clientAddress } from '../plugins/rate-limit.js';
import { createAuthorizationServer, OAUTH2_PREFIX, REGISTRATION_PATH, type AuthorizationServer } from './provider.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The platform's OAuth 2.1 authorization server for MCP clients (oauth2/provider.ts), made on
     * first use: it reads its keys from Postgres, and the edge starts and serves without Postgres.
     */
    authorizationServer: { get(): Promise<AuthorizationServer> };
  }
}

/** RFC 8414's metadata path for the issuer PUBLIC_URL/oauth2 (the well-known suffix goes before the path). */
const AS_METADATA_PATH = '/.well-known/oauth-authorization-server';

/**
 * Mounts the authorization server (oidc-provider, a Koa app) at /oauth2: each request under it is
 * handed to the provider's Node callback with the prefix taken off, its body unread (the provider
 * parses its own forms and JSON). Its discovery document is also served at the RFC 8414 addresses.
 * Every request counts against the caller address's public rate limit first. The provider is made on
 * first use (its keys are read from Postgres then), so the edge starts without Postgres like before.
 */
export default fp(
  async function authorizationServerPlugin(app: FastifyInstance) {
    let made: Promise<{ server: AuthorizationServer; callback: (req: IncomingMessage, res: ServerResponse) => void }> | null = null;
    const make = () =>
      (made ??= createAuthorizationServer(app.deps.sql, app.deps.settings).then(
        (server) => {
          // Every URL the provider writes is on PUBLIC_URL (see handOver).
          server.provider.proxy = true;
          // The provider's own failures are answered by it (as OAuth errors); a 500 among them is logged, without the request's parameters.
          server.provider.on('server_error', (_ctx: unknown, error: unknown) =>
            app.log.error({ err: { message: (error as Error)?.message, name: (error as Error)?.name } }, 'authorization server error'),
          );
          return { server, callback: server.provider.callback() };
        },
        (error: unknown) => {
          made = null;
          throw error;
        },
      ));
    app.decorate('authorizationServer', { get: async () => (await make()).server });

    // Every URL the provider writes (endpoints, redirects, cookie scopes) is on PUBLIC_URL, whatever
    // Host the request came with: it is told so the way a proxy would tell it (and trusts only that).
    const site = new URL(app.deps.settings.PUBLIC_URL);
    const handOver = async (request: FastifyRequest, reply: FastifyReply) => {
      // The router also matches percent-encoded spellings of the prefix: only the plain one is handed over.
      if (!request.raw.url?.startsWith(OAUTH2_PREFIX))
        throw new PlatformError('not_found', 'Route not found', { hint: `The authorization server is at ${OAUTH2_PREFIX}.` });
      await app.rateLimiter.consume(request, reply, 'public', `ip:${clientAddress(request.ip)}`);
      const { callback } = await make();
      reply.hijack();
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value as string);
      const raw = request.raw as typeof request.raw & { originalUrl?: string };
      raw.headers['x-forwarded-proto'] = site.protocol.slice(0, -1);
      raw.headers['x-forwarded-host'] = site.host;
      delete raw.headers['x-forwarded-for'];
      // As Express mounts a sub-app: the provider reads its mount path from originalUrl minus url.
      raw.originalUrl = raw.url;
      const rest = raw.url!.slice(OAUTH2_PREFIX.length);
      raw.url = rest.startsWith('/') ? rest : `/${rest}`;
      // Open registration answers any origin (it takes no cookie and no credential), so clients that
      // run in a browser can register; the provider gives its other endpoints their own CORS rules.
      if (raw.url.split('?')[0] === REGISTRATION_PATH) {
        reply.raw.setHeader('Access-Control-Allow-Origin', '*');
        if (request.method === 'OPTIONS') {
          reply.raw.writeHead(204, {
            'Access-Control-Allow-Methods': 'POST',
            'Access-Control-Allow-Headers': 'content-type, authorization',
            'Access-Control-Max-Age': '3600',
          });
          reply.raw.end();
          return;
        }
      }
      callback(raw, reply.raw);
    };

    await app.register(async (scope) => {
      // The provider reads request bodies itself: Fastify must leave them in the stream.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
      for (const url of [OAUTH2_PREFIX, `${OAUTH2_PREFIX}/*`]) {
        scope.route({
          method: ['GET', 'POST', 'OPTIONS', 'DELETE', 'PUT', 'HEAD'],
          url,
          schema: { hide: true },
          config: { secretQuery: true },
          handler: handOver,
        });
      }
    });

    // RFC 8414: the provider serves OpenID discovery under its issuer; the same document (its fields
    // are RFC 8414's) is served at the OAuth addresses, path-aware and at the root.
    let metadata: string | null = null;
    for (const url of [`${AS_METADATA_PATH}${OAUTH2_PREFIX}`, AS_METADATA_PATH, `/.well-known/openid-configuration${OAUTH2_PREFIX}`]) {
      app.get(url, { schema: { hide: true } }, async (_request, reply) => {
        if (metadata === null) {
          const answer = await app.inject({ method: 'GET', url: `${OAUTH2_PREFIX}/.well-known/openid-configuration` });
          // Not cached when it failed (Postgres down: a 503 with Retry-After, passed on as it is).
          if (answer.statusCode !== 200) return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
          metadata = answer.body;
        }
        reply.header('Access-Control-Allow-Origin', '*');
        reply.header('Cache-Control', 'public, max-age=3600');
        reply.type('application/json; charset=utf-8');
        return metadata;
      });
    }
  },
  { name: 'authorization-server', dependencies: ['deps', 'rate-limit'] },
);
