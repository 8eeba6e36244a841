import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import { guardedLookup, MeteredCall, PrivateUpstreamError, UpstreamSilent, type UpstreamClient } from '#core/gateway';
import { PlatformError } from '#core/platform';
import type { EdgeSettings } from '../config.js';
import { UpstreamCall } from '../http/upstream-call.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The metered call (core/gateway), built once here; the REST proxy and MCP's call_api are its doors. */
    meteredCall: MeteredCall;
  }
}

/**
 * The composition root of the metered call: the upstream HTTP client (one undici Agent, its timeouts
 * and the SSRF-guarded DNS lookup), and the edge's caches, charges, refunds and usage recorder,
 * handed to core/gateway's MeteredCall.
 */
export default fp(
  async function gatewayPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const upstream = undiciUpstream(settings);
    app.addHook('onClose', async () => upstream.close());
    app.decorate(
      'meteredCall',
      new MeteredCall({
        settings,
        apis: app.apiCache,
        connections: app.connectionCache,
        oauth: app.oauth.tokens,
        upstream,
        refund: async (chargeId, reason, accountId) => {
          const outcome = await app.charges.refund(chargeId, reason, app.refundQueue, app.log, accountId);
          if (outcome.refunded && outcome.created) app.metrics.money('refunded', outcome.amountMicros);
          return outcome;
        },
        usage: app.usage,
        log: app.log,
        observe: app.metrics.observeCall,
        ...(app.tracing ? { tracer: app.tracing.tracer } : {}),
      }),
    );
  },
  { name: 'gateway', dependencies: ['deps', 'usage', 'charges', 'api-cache', 'oauth', 'metrics'] },
);

function undiciUpstream(settings: EdgeSettings): UpstreamClient & { close(): Promise<void> } {
  const agent = new Agent({
    keepAliveTimeout: 10_000,
    connections: 256,
    headersTimeout: settings.PROXY_HEADERS_TIMEOUT_MS,
    bodyTimeout: settings.PROXY_BODY_TIMEOUT_MS,
    connect: settings.ALLOW_PRIVATE_UPSTREAMS
      ? { timeout: settings.PROXY_CONNECT_TIMEOUT_MS }
      : { timeout: settings.PROXY_CONNECT_TIMEOUT_MS, lookup: guardedLookup as never },
  });
  const retryAfter = String(settings.PROXY_RETRY_AFTER_SECONDS);
  return {
    request(request) {
      const call = new UpstreamCall(request.body);
      request.deadline.bind(call);
      agent.dispatch(
        { origin: request.origin, path: request.path, method: request.method as Dispatcher.HttpMethod, headers: request.headers, body: request.body },
        call,
      );
      return call.response;
    },
    classifyFailure(error) {
      if (error instanceof PrivateUpstreamError || (error as { cause?: unknown })?.cause instanceof PrivateUpstreamError) {
        const failure = new PlatformError(
          'private_upstream',
          'The upstream resolves to a private, loopback or link-local address; the proxy refuses it',
          {
            hint: 'The call was refunded. Register the API with a public base URL.',
            details: {},
          },
        );
        return { failure, timedOut: false };
      }
      const timedOut =
        error instanceof UpstreamSilent ||
        error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.ConnectTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError;
      const failure = new PlatformError(
        'upstream_unavailable',
        timedOut ? 'The upstream did not answer in time' : 'The upstream could not be reached',
        {
          hint: 'The call was refunded. Retry after the number of seconds in Retry-After.',
          headers: { 'Retry-After': retryAfter },
          details: {},
        },
      );
      return { failure, timedOut };
    },
    close: () => agent.close(),
  };
}
