import { SpanKind, SpanStatusCode, trace, ROOT_CONTEXT, type Link, type Tracer } from '@opentelemetry/api';
import { storeUsageEvents, usageBatchJob } from '#core/billing';
import { spanContextOf } from '#core/platform';
import type { UsageEvent } from '#db/usage';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/** At most this many traced calls of one batch are linked from its span. */
const MAX_LINKS = 128;

/**
 * Usage aggregation: each job is a batch of usage events from an edge. The batch is written in one
 * transaction that inserts the events by id (`on conflict do nothing`) and adds only the new ones to
 * the per account, API and day totals, so a retried job or a worker killed mid-batch never counts
 * an event twice. Paths are redacted on the way in (storeUsageEvents), off the edge's response path.
 *
 * With tracing on, a batch that carries traced calls gets a consumer span (see `traced`).
 */
export function usageProcessor(deps: Pick<QueueDeps, 'sql'> & Partial<Pick<QueueDeps, 'tracing'>>): QueueProcessor {
  const tracer = deps.tracing?.tracer;
  return processorFor(
    usageBatchJob,
    async ({ events }, job) => {
      const inserted = tracer
        ? await traced(tracer, events, job.id, () => storeUsageEvents(deps.sql, events))
        : await storeUsageEvents(deps.sql, events);
      return { events: events.length, inserted };
    },
    // One statement in a transaction, bounded by the 30 s statement timeout: a batch still unwritten
    // after 45 s waits on something that will not answer (see processorFor); it fails and its retry
    // writes it.
    { concurrency: 4, deadlineMs: 45_000 },
  );
}

/**
 * The span of a batch: `usage-events process`, a child of the first traced call's usage span (so
 * a sampled call's trace, usually alone in its batch, runs on into the worker) and linked to the
 * usage span of every traced call in the batch (docs/decisions/tracing-usage-batches.md). A batch
 * without traced calls makes no span.
 */
async function traced(tracer: Tracer, events: UsageEvent[], jobId: string | undefined, store: () => Promise<number>): Promise<number> {
  const links: Link[] = [];
  for (const event of events) {
    if (!event.traceparent || links.length >= MAX_LINKS) continue;
    const linked = spanContextOf(event.traceparent);
    if (linked) links.push({ context: linked });
  }
  const first = links[0];
  if (!first) return store();
  const span = tracer.startSpan('usage-events process', { kind: SpanKind.CONSUMER, links }, trace.setSpanContext(ROOT_CONTEXT, first.context));
  if (span.isRecording()) {
    span.setAttributes({
      'messaging.system': 'bullmq',
      'messaging.destination.name': 'usage-events',
      'messaging.operation.type': 'process',
      'messaging.batch.message_count': events.length,
    });
    // The job's id, to find it on the queue board.
    if (jobId) span.setAttribute('messaging.message.id', jobId);
  }
  try {
    const inserted = await store();
    if (span.isRecording()) span.setAttribute('platform.usage.inserted', inserted);
    return inserted;
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    if (span.isRecording()) span.setAttribute('error.type', (error as { code?: string }).code ?? (error as Error).name ?? 'error');
    throw error;
  } finally {
    span.end();
  }
}
