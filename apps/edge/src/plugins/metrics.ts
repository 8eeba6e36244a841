import type { FastifyInstance } from 'fastify';
import { routeOf } from '../http/route-options.js';
import fp from 'fastify-plugin';
import type { CallObserver } from '#core/gateway';
import { BoundedLabel, createRegistry, prom, serveMetrics, TallyCounter, TallyHistogram, type Registry } from '#core/platform';

/** Distinct API ids an edge labels its proxy series with; the rest are counted as "other". */
const MAX_API_LABELS = 200;
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface EdgeMetrics {
  registry: Registry;
  /** The metered call's observer (core/gateway MeteredCall): outcome, upstream latency, money charged. */
  observeCall: CallObserver;
  /** Money moved, in micro-dollars, by kind. */
  money(kind: 'charged' | 'refunded' | 'credited', micros: bigint): void;
  /** The metrics endpoint's port once listening (METRICS_PORT), else null. */
  port: number | null;
  /** Counts an MCP request while it is served (the MCP route wraps its work in it). */
  mcpRequest<T>(work: () => Promise<T>): Promise<T>;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: EdgeMetrics;
  }
}

/**
 * The edge's Prometheus metrics (docs/OPERATIONS.md, "Metrics"), served on METRICS_HOST:METRICS_PORT,
 * never on the public port. Every series is cheap on the request path: one histogram observation per
 * request and one counter increment per metered call; gauges are read when scraped.
 */
export default fp(
  async function metricsPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    if (settings.METRICS_PORT === null) {
      // No endpoint, no metrics: nothing would read them, so no request pays for a single observation.
      app.decorate('metrics', disabledMetrics());
      return;
    }
    const registry = createRegistry('edge');
    const apis = new BoundedLabel(MAX_API_LABELS);
    // The series updated on every request are tallies (core/platform's TallyHistogram and
    // TallyCounter): plain fields per series, handed to prom-client when scraped.
    const http = new TallyHistogram({
      name: 'platform_http_request_duration_seconds',
      help: 'HTTP requests by method, route (the route pattern, "unmatched" for none) and status',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    const calls = new TallyCounter({
      name: 'platform_proxy_calls_total',
      help: 'Metered calls by API (at most 200 ids per edge, then "other") and outcome: charged, upstream_4xx (charged), upstream_5xx, timeout, unreachable, refunded (refunded), payment_required (402), rate_limited (429), refused (before the charge)',
      labelNames: ['api', 'outcome'] as const,
      registers: [registry],
    });
    const upstreamLatency = new TallyHistogram({
      name: 'platform_upstream_latency_seconds',
      help: "Time from forwarding a metered call to the upstream's answer headers, by API",
      labelNames: ['api'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    const money = new TallyCounter({
      name: 'platform_money_micros_total',
      help: 'Money moved by this edge in micro-dollars: charged (every priced item), refunded (failed metered calls), credited (sandbox top-ups and Stripe payments)',
      labelNames: ['kind'] as const,
      registers: [registry],
    });
    new prom.Gauge({
      name: 'platform_credit_holds_open',
      help: 'Credit holds this edge has open',
      registers: [registry],
      collect() {
        this.set(app.charges?.openHolds() ?? 0);
      },
    });
    let settlementFailuresSeen = 0;
    new prom.Counter({
      name: 'platform_credit_hold_settlement_failures_total',
      help: 'Settlements of credit holds that failed (retried at the next one)',
      registers: [registry],
      collect() {
        const now = app.charges?.stats.failedSettlements ?? 0;
        if (now > settlementFailuresSeen) this.inc(now - settlementFailuresSeen);
        settlementFailuresSeen = now;
      },
    });
    new prom.Gauge({
      name: 'platform_sse_streams_open',
      help: 'Server-sent event streams open on this edge',
      registers: [registry],
      collect() {
        this.set(app.eventStreams?.size ?? 0);
      },
    });
    const mcp = new prom.Gauge({
      name: 'platform_mcp_requests_in_flight',
      help: 'MCP requests being served (the transport is stateless: one per POST /mcp)',
      registers: [registry],
    });

    const countCall = (api: string, outcome: string) => calls.inc(`${outcome} ${api}`, () => ({ api, outcome }));

    app.addHook('onResponse', (request, reply, done) => {
      const route = routeOf(request).url ?? 'unmatched';
      const status = reply.statusCode;
      const method = request.method;
      http.observe(`${method} ${status} ${route}`, () => ({ method, route, status: String(status) }), reply.elapsedTime / 1000);
      // Refused by the rate limiter before the metered call began.
      if (status === 429 && route.startsWith('/api/v1/proxy/')) {
        const apiId = (request.params as { apiId?: string } | undefined)?.apiId;
        if (apiId) countCall(apis.value(apiId), 'rate_limited');
      }
      done();
    });

    const metrics: EdgeMetrics = {
      registry,
      observeCall: ({ apiId, outcome, upstreamSeconds }) => {
        const api = apis.value(apiId);
        countCall(api, outcome);
        if (upstreamSeconds !== null) upstreamLatency.observe(api, () => ({ api }), upstreamSeconds);
      },
      money: (kind, micros) => {
        if (micros > 0n) money.inc(kind, () => ({ kind }), Number(micros));
      },
      port: null,
      mcpRequest: async (work) => {
        mcp.inc();
        try {
          return await work();
        } finally {
          mcp.dec();
        }
      },
    };
    app.decorate('metrics', metrics);

    let server: Awaited<ReturnType<typeof serveMetrics>> | null = null;
    const port = settings.METRICS_PORT;
    app.addHook('onReady', async () => {
      server = await serveMetrics(registry, { host: settings.METRICS_HOST, port });
      metrics.port = server.port;
      app.log.info({ metrics: `http://${settings.METRICS_HOST}:${server.port}/metrics` }, 'metrics endpoint listening');
    });
    app.addHook('onClose', async () => server?.close());
  },
  { name: 'metrics', dependencies: ['deps'] },
);

/** The edge's metrics when METRICS_PORT is empty: every observation is a no-op and no hook is added. */
function disabledMetrics(): EdgeMetrics {
  return {
    registry: new prom.Registry(),
    observeCall: () => {},
    money: () => {},
    port: null,
    mcpRequest: (work) => work(),
  };
}
