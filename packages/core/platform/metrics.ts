import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import { z } from 'zod';

/**
 * Prometheus metrics of one process (prom-client): each process (edge, queue workers, Temporal
 * worker) has its own registry with Node's default metrics (CPU, memory, event-loop lag, GC) and
 * its own series, served on a port of its own (METRICS_HOST:METRICS_PORT), never on the public one.
 * Every metric is named `platform_*`; label values come from bounded sets (see BoundedLabel and
 * docs/OPERATIONS.md, "Metrics").
 */

export const metricsSettings = z.object({
  /** The address the metrics endpoint listens on: loopback unless a scraper elsewhere must reach it. */
  METRICS_HOST: z.string().default('127.0.0.1'),
  /** The metrics endpoint's port (GET /metrics); empty turns it off, 0 picks a free one. */
  METRICS_PORT: z
    .union([z.literal(''), z.coerce.number().int().min(0).max(65_535)])
    .optional()
    .transform((value) => (value === '' || value === undefined ? null : value)),
});

export type Registry = client.Registry;
export { client as prom };

export function createRegistry(processName: string): client.Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ process: processName });
  client.collectDefaultMetrics({ register: registry, prefix: 'platform_', eventLoopMonitoringPrecision: 20 });
  // prom-client names three gauges `*_total`, which Prometheus reserves for counters (promtool
  // refuses them): they are replaced by gauges named for what they are.
  for (const name of ['active_handles', 'active_requests', 'active_resources']) registry.removeSingleMetric(`platform_nodejs_${name}_total`);
  new client.Gauge({
    name: 'platform_nodejs_active_resources_by_type',
    help: 'Resources keeping the event loop alive (handles, requests, timers), by type',
    labelNames: ['type'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, number>();
      for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
      for (const [type, count] of counts) this.set({ type }, count);
    },
  });
  return registry;
}

/**
 * A label whose values come from an open set (API ids: 2,600 and growing) kept to at most `max`
 * distinct values per process: the first `max` seen keep their name, later ones are counted as
 * "other", so a scan across the directory cannot blow up the series count.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  value(raw: string): string {
    if (this.seen.has(raw)) return raw;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(raw);
    return raw;
  }
}

/**
 * Series of one metric kept in plain fields and handed to the registry only when it is scraped: the
 * hot path pays a Map look-up by a key the caller builds (`key`), and builds the labels object only
 * the first time a key is seen. prom-client's own metrics check and hash the labels object on every
 * update, about 1.5 µs each, four times per metered call (docs/decisions/metrics-tallied-per-series.md).
 */
abstract class Tally<L extends string, S extends { labels: Record<L, string> }> {
  readonly aggregator = 'sum';
  protected readonly series = new Map<string, S>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    registers: client.Registry[],
  ) {
    for (const registry of registers) registry.registerMetric(this as unknown as client.Metric);
  }

  protected seriesOf(key: string, labels: () => Record<L, string>): S {
    let series = this.series.get(key);
    if (series === undefined) {
      series = this.fresh(labels());
      this.series.set(key, series);
    }
    return series;
  }

  protected abstract fresh(labels: Record<L, string>): S;

  /** What the registry reads when scraped (prom-client's MetricObject shape). */
  abstract get(): { name: string; help: string; type: string; aggregator: string; values: client.MetricValueWithName<string>[] };

  reset(): void {
    this.series.clear();
  }
}

function valuePair(labels: Record<string, string | number>, value: number, metricName: string, sharedLabels: Record<string, string>) {
  return { labels, sharedLabels, value, metricName } as client.MetricValueWithName<string>;
}

/** A counter by labels (see Tally). */
export class TallyCounter<L extends string> extends Tally<L, { labels: Record<L, string>; value: number }> {
  constructor(options: { name: string; help: string; labelNames: readonly L[]; registers: client.Registry[] }) {
    super(options.name, options.help, 'counter', options.registers);
  }

  /** Adds `by` (default 1) to the series `key`, whose labels `labels()` makes the first time. */
  inc(key: string, labels: () => Record<L, string>, by = 1): void {
    this.seriesOf(key, labels).value += by;
  }

  protected fresh(labels: Record<L, string>) {
    return { labels, value: 0 };
  }

  get() {
    const values = [...this.series.values()].map(({ labels, value }) => ({ labels, value, metricName: this.name }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

/** A histogram by labels (see Tally), cumulative buckets at scrape as Prometheus reads them. */
export class TallyHistogram<L extends string> extends Tally<L, { labels: Record<L, string>; counts: number[]; sum: number; count: number }> {
  private readonly buckets: readonly number[];

  constructor(options: { name: string; help: string; labelNames: readonly L[]; buckets: readonly number[]; registers: client.Registry[] }) {
    super(options.name, options.help, 'histogram', options.registers);
    this.buckets = [...options.buckets].sort((a, b) => a - b);
  }

  /** Counts `value` in the series `key`, whose labels `labels()` makes the first time. */
  observe(key: string, labels: () => Record<L, string>, value: number): void {
    const series = this.seriesOf(key, labels);
    const buckets = this.buckets;
    let i = 0;
    while (i < buckets.length && value > buckets[i]!) i += 1;
    // Past the last bound: only +Inf (the count) holds it.
    if (i < buckets.length) series.counts[i]! += 1;
    series.sum += value;
    series.count += 1;
  }

  protected fresh(labels: Record<L, string>) {
    return { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
  }

  /** As prom-client's `get()`: every line's labels in one object. */
  get() {
    const text = this.getForPromString();
    const values = text.values.map(({ labels, sharedLabels, ...rest }: client.MetricValueWithName<string> & { sharedLabels?: object }) => ({
      ...rest,
      labels: { ...sharedLabels, ...labels },
    }));
    return { ...text, values };
  }

  /** What the registry writes when scraped (prom-client's Histogram hands the same shape). */
  getForPromString() {
    const values: client.MetricValueWithName<string>[] = [];
    for (const { labels, counts, sum, count } of this.series.values()) {
      let cumulative = 0;
      // The series' labels as `sharedLabels`, as prom-client's Histogram hands them: the lines then
      // read the same, label order included.
      this.buckets.forEach((bound, i) => {
        cumulative += counts[i]!;
        values.push(valuePair({ le: bound }, cumulative, `${this.name}_bucket`, labels));
      });
      values.push(valuePair({ le: '+Inf' }, count, `${this.name}_bucket`, labels));
      values.push(valuePair({}, sum, `${this.name}_sum`, labels));
      values.push(valuePair({}, count, `${this.name}_count`, labels));
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

/** Serves `GET /metrics` (and nothing else) for a registry; `extra` appends other exposition text (the Temporal SDK's). */
export async function serveMetrics(
  registry: client.Registry,
  options: { host: string; port: number; extra?: () => Promise<string> },
): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || (request.url ?? '').split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n');
      return;
    }
    void (async () => {
      try {
        let text = await registry.metrics();
        if (options.extra) text += await options.extra().catch(() => '');
        response.writeHead(200, { 'content-type': registry.contentType }).end(text);
      } catch (error) {
        response.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(error as Error).message}\n`);
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
