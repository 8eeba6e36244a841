import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { extractTraceContext, parseSettings, spanContextOf, traceparentOf, Tracing, tracingSettings } from '#core/platform';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

/** Runs `check` with tracing started as given, and always leaves the process's OpenTelemetry globals as they were. */
async function withTracing(options: { ratio: number; trustRemoteSampling: boolean }, check: (tracing: Tracing) => void): Promise<void> {
  const tracing = await Tracing.start({
    service: 'unit',
    settings: { OTEL_TRACES_SAMPLER_ARG: options.ratio },
    trustRemoteSampling: options.trustRemoteSampling,
    exporter: new InMemorySpanExporter(),
  });
  if (!tracing) throw new Error('tracing did not start with an exporter');
  try {
    check(tracing);
  } finally {
    await tracing.shutdown();
  }
}

describe('tracing settings', () => {
  it('are off by default, and read an empty value (as docker-compose passes an unset one) as unset', async () => {
    expect(parseSettings(tracingSettings, {})).toEqual({ OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_TRACES_SAMPLER_ARG: 1 });
    expect(parseSettings(tracingSettings, { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_SAMPLER_ARG: '' })).toEqual({
      OTEL_EXPORTER_OTLP_ENDPOINT: undefined,
      OTEL_TRACES_SAMPLER_ARG: 1,
    });
    expect(await Tracing.start({ service: 'unit', settings: parseSettings(tracingSettings, {}), trustRemoteSampling: false })).toBeNull();
    // Off, nothing was registered: the API hands out its no-op tracer.
    expect(trace.getTracer('unit').startSpan('x').isRecording()).toBe(false);
  });

  it('name a bad endpoint or ratio', () => {
    expect(() => parseSettings(tracingSettings, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => parseSettings(tracingSettings, { OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(parseSettings(tracingSettings, { OTEL_TRACES_SAMPLER_ARG: '0.05' }).OTEL_TRACES_SAMPLER_ARG).toBe(0.05);
  });
});

describe('sampling', () => {
  const sampled = extractTraceContext({ traceparent: `00-${TRACE}-${PARENT}-01` });
  const unsampled = extractTraceContext({ traceparent: `00-${TRACE}-${PARENT}-00` });

  it("at the edge, decides by its own ratio whatever a caller's traceparent says, keeping the caller's trace id", async () => {
    await withTracing({ ratio: 0, trustRemoteSampling: false }, ({ tracer }) => {
      expect(tracer.startSpan('forced', undefined, sampled).isRecording()).toBe(false);
    });
    await withTracing({ ratio: 1, trustRemoteSampling: false }, ({ tracer }) => {
      const span = tracer.startSpan('continued', undefined, unsampled);
      expect(span.isRecording()).toBe(true);
      expect(span.spanContext().traceId).toBe(TRACE);
    });
  });

  it("in a worker, follows the edge's decision carried with the work", async () => {
    await withTracing({ ratio: 0, trustRemoteSampling: true }, ({ tracer }) => {
      expect(tracer.startSpan('followed', undefined, sampled).isRecording()).toBe(true);
      expect(tracer.startSpan('root', undefined, context.active()).isRecording()).toBe(false);
    });
  });

  it('carries a recording span as a traceparent and reads it back', async () => {
    await withTracing({ ratio: 1, trustRemoteSampling: false }, ({ tracer }) => {
      const span = tracer.startSpan('usage', undefined, sampled);
      const traceparent = traceparentOf(span);
      expect(traceparent).toBe(`00-${TRACE}-${span.spanContext().spanId}-01`);
      expect(spanContextOf(traceparent as string)).toMatchObject({ traceId: TRACE, spanId: span.spanContext().spanId, isRemote: true });
      expect(spanContextOf('00-not-a-trace-01')).toBeUndefined();
    });
  });
});

/** A loopback OTLP/HTTP collector that records what it is sent and answers with `status`. */
async function startCollector(status = 200) {
  const received: Array<{ method?: string; url?: string; type?: string; body: Buffer }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, type: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    received,
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('export', () => {
  it('batches spans to <OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces over OTLP/HTTP, and flushes them at shutdown', async () => {
    const collector = await startCollector();
    const { received, endpoint } = collector;
    try {
      const tracing = await Tracing.start({
        service: 'unit-export',
        settings: parseSettings(tracingSettings, { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }),
        trustRemoteSampling: false,
      });
      expect(tracing).not.toBeNull();
      tracing?.tracer.startSpan('exported-span-name').end();
      await tracing?.shutdown();
      expect(received).toHaveLength(1);
      expect(received[0]).toMatchObject({ method: 'POST', url: '/v1/traces', type: 'application/json' });
      const sent = JSON.parse(received[0]?.body.toString() ?? '{}') as {
        resourceSpans: Array<{
          resource: { attributes: Array<{ key: string; value: unknown }> };
          scopeSpans: Array<{ spans: Array<{ name: string }> }>;
        }>;
      };
      expect(sent.resourceSpans[0]?.resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'unit-export' } });
      expect(sent.resourceSpans[0]?.scopeSpans[0]?.spans.map((span) => span.name)).toEqual(['exported-span-name']);
    } finally {
      await collector.close();
    }
  });

  it('tells the log when the collector refuses spans, without the request it sent', async () => {
    const collector = await startCollector(400);
    const lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
    const log = {
      warn: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'warn', fields, message }),
      error: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'error', fields, message }),
    };
    try {
      const settings = parseSettings(tracingSettings, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint });
      const tracing = await Tracing.start({ service: 'unit-refused', settings, trustRemoteSampling: false, log });
      tracing?.tracer.startSpan('refused-span').end();
      await tracing?.shutdown();
      expect(collector.received).toHaveLength(1);
      expect(lines.length, JSON.stringify(lines)).toBeGreaterThan(0);
      expect(lines[0]?.message).toMatch(/^tracing: /);
      expect(JSON.stringify(lines)).not.toContain('refused-span');
    } finally {
      await collector.close();
    }
  });
});
