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
