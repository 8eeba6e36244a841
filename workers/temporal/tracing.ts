import { fileURLToPath } from 'node:url';
import { makeWorkflowExporter, OpenTelemetryActivityInboundInterceptor, type OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry';
import type { InjectedSinks, WorkerInterceptors } from '@temporalio/worker';
import type { Tracing } from '#core/platform';

/** The workflow interceptors' module, bundled into the workflow code when tracing is on. */
export const workflowTracingModule = fileURLToPath(new URL('../../workflows/tracing-interceptors.ts', import.meta.url));

/**
 * What a Temporal worker adds to its options when tracing is on: the workflow interceptors (spans
 * for the run, its updates, the activities it schedules), the sink through which the workflow
 * sandbox hands its finished spans to the process's span processor, and the activity interceptor
 * that continues the trace the workflow put in the activity's headers. Tracing off: nothing.
 */
export function temporalWorkerTracing(tracing: Tracing | null): { interceptors?: WorkerInterceptors; sinks?: InjectedSinks<OpenTelemetrySinks> } {
  if (!tracing) return {};
  return {
    interceptors: {
      workflowModules: [workflowTracingModule],
      activity: [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer: tracing.tracer }) })],
    },
    sinks: { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) },
  };
}
