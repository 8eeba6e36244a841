import {
  context,
  defaultTextMapGetter,
  diag,
  DiagLogLevel,
  defaultTextMapSetter,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { z } from 'zod';
import type { Logger } from './logger.js';

/**
 * OpenTelemetry tracing of one process (docs/OPERATIONS.md, "Tracing"). Off unless
 * OTEL_EXPORTER_OTLP_ENDPOINT is set: then `Tracing.start` returns null, nothing is registered with
 * the OpenTelemetry API, and the code that would make spans is handed no tracer, so an untraced
 * call does no tracing work at all (not even the API's no-op spans).
 *
 * On: a NodeTracerProvider with W3C trace context, a parent-based ratio sampler
 * (OTEL_TRACES_SAMPLER_ARG) and spans batched to an OTLP/HTTP collector. It is registered as the
 * process's global provider because Temporal's OpenTelemetry interceptors find the context and the
 * propagator through the API's globals. The SDK, its exporter and Temporal's client interceptor are
 * loaded only then (about 4.5 MB of heap a process without tracing does not carry).
 */

/** The OpenTelemetry SDK, loaded when tracing starts. */
async function loadSdk() {
  const [base, node, resources, exporter, conventions, temporal] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/semantic-conventions'),
    import('@temporalio/interceptors-opentelemetry'),
  ]);
  return { ...base, ...node, ...resources, ...exporter, ATTR_SERVICE_NAME: conventions.ATTR_SERVICE_NAME, ...temporal };
}
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

const emptyIsUnset = (value: unknown) => (value === '' ? undefined : value);

export const tracingSettings = z.object({
  /**
   * The OTLP/HTTP collector's base URL (spans go to `<this>/v1/traces`), e.g. http://127.0.0.1:4318.
   * Unset (the default): tracing is off. Headers for the collector (OTEL_EXPORTER_OTLP_HEADERS) are
   * read by the exporter itself.
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess(
    emptyIsUnset,
    z
      .string()
      .url()
      .regex(/^https?:\/\//, 'expected an http(s) URL such as http://127.0.0.1:4318 (OTLP over HTTP)')
      .optional(),
  ),
  /**
   * Share (0 to 1) of traces recorded, decided once where a trace starts (parent-based: the workers
   * follow the edge's decision). A `traceparent` sent by a caller keeps its trace id but not its
   * sampling flag: the edge decides by this ratio, so no caller can make it record every call.
   */
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(emptyIsUnset, z.coerce.number().min(0).max(1).default(1)),
});

export type TracingSettings = z.output<typeof tracingSettings>;

export interface TracingOptions {
  /** `service.name` of the spans: platform-edge, platform-queue-worker, platform-temporal-worker. */
  service: string;
  settings: TracingSettings;
  /**
   * False at the public edge: a remote parent's sampled flag comes from the internet and is not
   * obeyed. True in the workers, whose remote parents are the platform's own spans.
   */
  trustRemoteSampling: boolean;
  /** Tests: spans go to this exporter, one at a time as they end, and tracing is on whatever the settings say. */
  exporter?: SpanExporter;
  /** Where the SDK's own warnings and errors go (a collector that refuses or cannot be reached, spans dropped). */
  log?: Logger;
}

const w3c = new W3CTraceContextPropagator();

export class Tracing {
  readonly tracer: Tracer;
  readonly resource: Resource;
  /** What ended spans are handed to; also the workflow span sink's (Temporal's makeWorkflowExporter). */
  readonly processor: SpanProcessor;
  private readonly provider: NodeTracerProvider;
  private readonly log: Logger | undefined;
  private stopped = false;

  private constructor(
    private readonly sdk: Sdk,
    options: TracingOptions & { exporter: SpanExporter; batched: boolean },
  ) {
    this.resource = new sdk.Resource({ [sdk.ATTR_SERVICE_NAME]: options.service, 'service.namespace': 'platform' });
    const ratio = new sdk.TraceIdRatioBasedSampler(options.settings.OTEL_TRACES_SAMPLER_ARG);
    const sampler = options.trustRemoteSampling
      ? new sdk.ParentBasedSampler({ root: ratio })
      : new sdk.ParentBasedSampler({ root: ratio, remoteParentSampled: ratio, remoteParentNotSampled: ratio });
    this.processor = options.batched ? new sdk.BatchSpanProcessor(options.exporter) : new sdk.SimpleSpanProcessor(options.exporter);
    this.provider = new sdk.NodeTracerProvider({ resource: this.resource, sampler, spanProcessors: [this.processor] });
    this.provider.register({ propagator: w3c });
    this.tracer = this.provider.getTracer('platform');
    const { log } = options;
    this.log = log;
    if (log) {
      // Only the SDK's message and the messages of errors it passes: never its objects (requests, headers).
      const text = (args: unknown[]) => args.map((arg) => (arg instanceof Error ? arg.message : typeof arg === 'string' ? arg : '')).filter(Boolean);
      diag.setLogger(
        {
          error: (message, ...args) => log.error({ details: text(args) }, `tracing: ${message}`),
          warn: (message, ...args) => log.warn({ details: text(args) }, `tracing: ${message}`),
          info: () => {},
          debug: () => {},
          verbose: () => {},
        },
        { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
      );
    }
  }

  /** Tracing as the settings (or a test's exporter) ask, or null when it is off (the SDK is then never loaded). */
  static async start(options: TracingOptions): Promise<Tracing | null> {
    const endpoint = options.settings.OTEL_EXPORTER_OTLP_ENDPOINT;
    if (!options.exporter && !endpoint) return null;
    const sdk = await loadSdk();
    if (options.exporter) return new Tracing(sdk, { ...options, exporter: options.exporter, batched: false });
    const exporter = new sdk.OTLPTraceExporter({ url: `${endpoint!.replace(/\/+$/, '')}/v1/traces` });
    return new Tracing(sdk, { ...options, exporter, batched: true });
  }

  /**
   * The Temporal client's interceptor: starting a workflow and sending it an update make a span each
   * and carry the trace context to the workflow in the call's headers.
   */
  workflowClientInterceptor(): OpenTelemetryWorkflowClientInterceptor {
    return new this.sdk.OpenTelemetryWorkflowClientInterceptor({ tracer: this.tracer });
  }

  /** Exports what is left and unregisters the globals (a test file may start tracing again). */
  async shutdown(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // The last batch's failure rejects here (a periodic batch's goes to the log through diag).
    await this.provider.shutdown().catch((error: unknown) => {
      this.log?.error({ details: [error instanceof Error ? error.message : String(error)] }, 'tracing: the last spans could not be exported');
    });
    trace.disable();
    context.disable();
    propagation.disable();
    diag.disable();
  }
}

/** The trace context a request's `traceparent` / `tracestate` headers carry (the root context when none or malformed). */
export function extractTraceContext(headers: Record<string, string | string[] | undefined>): Context {
  return w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
}

/** The W3C `traceparent` of a recording span, to carry it where no propagator goes (a queue job's data). */
export function traceparentOf(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  w3c.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

/** The span context a `traceparent` names, or undefined when it is not a valid one. */
export function spanContextOf(traceparent: string): SpanContext | undefined {
  return trace.getSpanContext(w3c.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter));
}
