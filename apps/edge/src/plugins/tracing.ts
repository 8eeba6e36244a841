import { context, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { routeOf } from '../http/route-options.js';
import { ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE } from '@opentelemetry/semantic-conventions';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import fp from 'fastify-plugin';
import { extractTraceContext, type Tracing } from '#core/platform';

declare module 'fastify' {
  interface FastifyInstance {
    /** The process's tracing, or null when it is off (OTEL_EXPORTER_OTLP_ENDPOINT unset). */
    tracing: Tracing | null;
  }
  interface FastifyRequest {
    /** Tracing on: the request's server span, until it ends. */
    traceSpan?: Span | null;
    /** Tracing on: the context its handler runs in (the server span's). */
    traceContext?: Context | null;
  }
}

/**
 * A server span per request, when tracing is on. It continues the trace of an incoming
 * `traceparent` (its trace id; the sampling decision stays the edge's, see core/platform's
 * Tracing), is named by the route's template (`POST /api/v1/cookbooks/:cookbookId/start`), never by
 * the URL (which may carry keys in its path or query), and every route handler runs inside it, so
 * the spans made below it (the metered call's, the Temporal client's) are its children.
 *
 * Off, this plugin adds no hook and wraps no handler: a request pays nothing for tracing.
 */
export default fp(
  async function tracingPlugin(app: FastifyInstance) {
    const tracing = app.tracing;
    if (!tracing) return;
    const { tracer } = tracing;
    app.decorateRequest('traceSpan', null);
    app.decorateRequest('traceContext', null);

    // Every route added after this plugin runs its handler in the request's context.
    app.addHook('onRoute', (route) => {
      const handler = route.handler as RouteHandlerMethod;
      route.handler = function traced(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
        const traced = request.traceContext;
        return traced ? context.with(traced, handler, this, request, reply) : handler.call(this, request, reply);
      } as typeof route.handler;
    });

    app.addHook('onRequest', (request, _reply, done) => {
      const route = routeOf(request).url;
      const parent = extractTraceContext(request.headers);
      const span = tracer.startSpan(route ? `${request.method} ${route}` : request.method, { kind: SpanKind.SERVER }, parent);
      if (span.isRecording()) {
        span.setAttributes({ [ATTR_HTTP_REQUEST_METHOD]: request.method, 'platform.request_id': request.id });
        if (route) span.setAttribute(ATTR_HTTP_ROUTE, route);
      }
      request.traceSpan = span;
      request.traceContext = trace.setSpan(parent, span);
      done();
    });

    const end = (request: FastifyRequest, status: number | null) => {
      const span = request.traceSpan;
      if (!span) return;
      request.traceSpan = null;
      if (status === null) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        if (span.isRecording()) span.setAttribute(ATTR_ERROR_TYPE, 'request_aborted');
      } else {
        if (span.isRecording()) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    };
    app.addHook('onResponse', (request, reply, done) => {
      end(request, reply.statusCode);
      done();
    });
    app.addHook('onRequestAbort', (request, done) => {
      end(request, null);
      done();
    });
  },
  { name: 'tracing' },
);
