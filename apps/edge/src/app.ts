import { findUnstorableText, limitJsonBodies, unstorableTextError } from './http/json-body.js';
import { REQUEST_ID } from './http/request-id.js';
import { routeOf } from './http/route-options.js';
import { mintsMoneyInProduction } from '#core/billing';
import cookie from '@fastify/cookie';
import Fastify, { LogController, type FastifyInstance, type FastifyLoggerOptions, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { PlatformError, timeOrderedUuid, Tracing } from '#core/platform';
import type { EdgeSettings } from './config.js';
import { closeEdgeDeps, createEdgeDeps, type EdgeDeps } from './deps.js';
import { registerErrorHandling, sendError } from './errors.js';
import authPlugin from './plugins/auth.js';
import dashboardPlugin from './plugins/dashboard.js';
import openapiPlugin from './plugins/openapi.js';
import queueBoardPlugin from './plugins/queue-board.js';
import codecServerPlugin from './plugins/codec-server.js';
import rateLimitPlugin from './plugins/rate-limit.js';
import metricsPlugin from './plugins/metrics.js';
import tracingPlugin from './plugins/tracing.js';
import { registerApiRoutes } from './routes/index.js';
import routeCatalogPlugin from './plugins/route-catalog.js';
import authorizationServerPlugin from './oauth2/plugin.js';
import mcpPlugin, { mcpOriginGuard } from './mcp/plugin.js';

declare module 'fastify' {
  interface FastifyInstance {
    deps: EdgeDeps;
  }
  interface FastifyContextConfig {
    /** Set on the metered proxy's routes: their 2xx `request completed` lines are sampled (LOG_REQUEST_SAMPLE). */
    sampledRequestLog?: boolean;
    /** The query string carries secrets (the OAuth callback's code and state): request logs leave it out. */
    secretQuery?: boolean;
  }
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

const trustHops = (hops: number) => (_address: string, hop: number) => hop < hops;

export interface BuildOptions {
  /** Use these dependencies instead of creating them; the caller then owns closing them. */
  deps?: EdgeDeps;
  logger?: FastifyServerOptions['logger'];
  /**
   * The process's tracing (tests pass one with an in-memory exporter; null forces it off). By default
   * it is started from the settings, and shut down with the app.
   */
  tracing?: Tracing | null;
}

/** The proxy's routes: their query strings go to the upstream unchanged and may carry the caller's own keys. */
const PROXY_ROUTE_PREFIX = '/api/v1/proxy/';
export const isProxyRoute = (request: Pick<FastifyRequest, 'routeOptions'>) => routeOf(request).url?.startsWith(PROXY_ROUTE_PREFIX) === true;

/**
 * A request's URL as logged: without its query string when the request was routed to the proxy, or
 * to no route at all (whose query nobody vetted). Decided by the route the router matched, not by
 * the URL's text, which can spell the proxy's path otherwise (`/api/v1/%70roxy/...`).
 */
export function loggedUrl(request: Pick<FastifyRequest, 'url' | 'routeOptions'>): string {
  const url = request.url;
  const q = url.indexOf('?');
  if (q === -1) return url;
  return routeOf(request).url === undefined || isProxyRoute(request) || routeOf(request).config?.secretQuery === true
    ? `${url.slice(0, q)}?[redacted]`
    : url;
}

/**
 * The pino options of the edge: secrets in headers (and proxied query strings) never reach a log line.
 * A logged request or reply (the `req` and `res` keys) is reduced to the fields named here, so their
 * headers (keys, cookies) are never written. (pino's path redaction of those headers, which could find
 * nothing after these serializers, cost about 2 µs a line.)
 */
export function edgeLogger(settings: EdgeSettings): FastifyLoggerOptions {
  return {
    level: settings.LOG_LEVEL,
    serializers: {
      // A Fastify request, or the plain summary the request-completed line passes (which names its
      // client as `remoteAddress`: a plain object has no `ip`).
      req: (request: Partial<FastifyRequest> & { remoteAddress?: string }) => ({
        method: request.method,
        // A Fastify request is logged by its route; a plain summary (the request-completed line) carries its URL already as loggable.
        url: typeof request.url !== 'string' ? undefined : request.routeOptions ? loggedUrl(request as FastifyRequest) : request.url,
        host: request.host,
        remoteAddress: request.ip ?? request.remoteAddress,
        remotePort: request.socket?.remotePort,
      }),
      res: (reply: { statusCode?: number }) => ({ statusCode: reply.statusCode }),
    },
  };
}

/**
 * Builds the edge application without listening, so tests can inject requests. Dependencies are
 * created from the settings (and closed with the app) unless given.
 */
export async function buildApp(settings: EdgeSettings, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? edgeLogger(settings),
    // A hop count trusts that many proxies from the socket inward (proxy-addr's own rule for numbers).
    trustProxy: typeof settings.TRUST_PROXY === 'number' ? trustHops(settings.TRUST_PROXY) : settings.TRUST_PROXY,
    bodyLimit: settings.BODY_LIMIT_BYTES,
    requestIdHeader: false,
    // One summary line per request (the onResponse hook below) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      // Time-ordered (UUID version 7): each call's usage event keeps it in an index, where ids in about
      // the order of time land at its right edge (docs/decisions/time-ordered-ids.md).
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : timeOrderedUuid();
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Malformed percent-encoding or an over-long path parameter: the router answers before any
    // handler, so without this its own body (not the platform's error shape) would leave.
    frameworkErrors: (error, _request, reply) =>
      sendError(reply, new PlatformError('validation_failed', `Malformed URL: ${error.message}`, { hint: 'Percent-encode the path correctly.' })),
  }).withTypeProvider<ZodTypeProvider>();

  // Where hooks read a request's route options (routeOf): kept on the request after the first read.
  app.decorateRequest('routeOptionsOnce', null);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  limitJsonBodies(app, settings.JSON_MAX_DEPTH);

  if (mintsMoneyInProduction(settings)) {
    app.log.warn(
      { BILLING_MODE: settings.BILLING_MODE, ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: true },
      'SANDBOX TOP-UPS ARE ON IN PRODUCTION: any account can credit itself with POST /balance and spend it on APIs you pay for',
    );
  }
  const tracing =
    options.tracing !== undefined
      ? options.tracing
      : await Tracing.start({ service: 'platform-edge', settings, trustRemoteSampling: false, log: app.log });
  app.decorate('tracing', tracing);
  const ownsDeps = options.deps === undefined;
  const deps = options.deps ?? createEdgeDeps(settings, app.log, tracing);
  app.decorate('deps', deps);
  await app.register(fp(async () => {}, { name: 'deps' }));
  if (ownsDeps) app.addHook('onClose', async () => closeEdgeDeps(deps));
  // Closed with the app: the spans still buffered are exported.
  if (options.tracing === undefined && tracing) {
    app.log.info({ endpoint: settings.OTEL_EXPORTER_OTLP_ENDPOINT, ratio: settings.OTEL_TRACES_SAMPLER_ARG }, 'tracing on');
    app.addHook('onClose', async () => tracing.shutdown());
  }
  // Before any route: every handler then runs in its request's span (when tracing is on).
  await app.register(tracingPlugin);

  // Hooks run on every request are written with `done` rather than as async functions: no promise
  // and no extra microtask per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    done();
  });
  const sample = settings.LOG_REQUEST_SAMPLE;
  const firstPerSecond = settings.LOG_REQUEST_FIRST_PER_SECOND;
  // Successful proxied calls logged in the current one-second window (from its first such call).
  let windowStart = 0;
  let windowCount = 0;
  app.addHook('onResponse', (request, reply, done) => {
    if ((request.log as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.('info')) {
      const status = reply.statusCode;
      // A successful proxied call (a usage event anyway, found by its request id in the activity):
      // the first LOG_REQUEST_FIRST_PER_SECOND of each second are logged, then each with probability
      // LOG_REQUEST_SAMPLE, its line saying so; every other line is written.
      let sampled = sample < 1 && status >= 200 && status < 300 && routeOf(request).config.sampledRequestLog === true;
      if (sampled && firstPerSecond > 0) {
        const now = Date.now();
        if (now - windowStart >= 1000) {
          windowStart = now;
          windowCount = 0;
        }
        windowCount += 1;
        if (windowCount <= firstPerSecond) sampled = false;
      }
      if (!sampled || Math.random() < sample) {
        request.log.info(
          {
            req: { method: request.method, url: loggedUrl(request), remoteAddress: request.ip },
            res: { statusCode: status },
            responseTime: reply.elapsedTime,
            // (An undefined field is left out of the line.)
            sample: sampled ? sample : undefined,
          },
          'request completed',
        );
      }
    }
    done();
  });
  // Postgres text cannot hold the NUL character and jsonb no lone surrogate (a 500, or a session
  // wedged by a workflow activity failing for good, otherwise). JSON bodies are checked as they are
  // parsed (limitJsonBodies); query strings and path parameters here. (Percent-encoding cannot
  // carry a lone surrogate: the router refuses it in paths and the query parser leaves it undecoded.)
  app.addHook('preValidation', (request, _reply, done) => {
    // The proxy passes query and body through to the upstream untouched.
    if (isProxyRoute(request)) return done();
    for (const [part, value] of [
      ['query', request.query],
      ['path', request.params],
    ] as const) {
      const found = findUnstorableText(value);
      if (found) return done(unstorableTextError(part, found));
    }
    // A text/plain body is not parsed as JSON, and never reaches the JSON check.
    const found = typeof request.body === 'string' ? findUnstorableText(request.body) : null;
    done(found ? unstorableTextError('body', found) : undefined);
  });
  // The specification's 400s for a POST without a body or with a body that is not a JSON object,
  // before zod would report them as a less helpful type mismatch.
  app.addHook('preValidation', (request, _reply, done) => {
    const bodySchema = routeOf(request).schema?.body as { safeParse?: (value: unknown) => { success: boolean } } | undefined;
    if (!BODY_METHODS.has(request.method) || !bodySchema) return done();
    if (request.body === undefined || request.body === null) {
      // A route whose body is optional (its schema accepts no body) goes on without one.
      if (bodySchema.safeParse?.(undefined).success) return done();
      return done(new PlatformError('body_missing', 'Request body is missing', { hint: 'Send a JSON object with Content-Type: application/json.' }));
    }
    if (typeof request.body !== 'object' || Array.isArray(request.body)) {
      return done(new PlatformError('validation_failed', 'Request body must be a JSON object', { hint: 'Wrap the fields in {...}.' }));
    }
    done();
  });

  await app.register(openapiPlugin);
  await app.register(routeCatalogPlugin);
  await app.register(cookie);
  // Before authentication: a browser on a foreign origin is refused before its credentials are looked at.
  app.addHook('onRequest', mcpOriginGuard(settings));
  await app.register(authPlugin);
  await app.register(rateLimitPlugin);
  await app.register(authorizationServerPlugin);
  await app.register(metricsPlugin);
  await registerApiRoutes(app);
  await app.register(mcpPlugin);
  await app.register(queueBoardPlugin);
  await app.register(codecServerPlugin);
  await app.register(dashboardPlugin);
  return app;
}
