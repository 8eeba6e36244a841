// The workflow interceptors of tracing (Temporal's OpenTelemetry interceptors), bundled into the
// workflow code only when tracing is on (workers/temporal/tracing.ts). Inside the workflow sandbox
// they make spans for the workflow run, its updates and the activities it schedules, carry the trace
// context to the activities in their headers, and hand finished spans to the worker through the
// `exporter` sink. They add no command to a workflow's history, so a session started with tracing
// off replays with it on, and the other way round.
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { WorkflowInterceptors } from '@temporalio/workflow';

export const interceptors = (): WorkflowInterceptors => ({
  inbound: [new OpenTelemetryInboundInterceptor()],
  outbound: [new OpenTelemetryOutboundInterceptor()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
