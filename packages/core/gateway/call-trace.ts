import { context, SpanKind, SpanStatusCode, type Context, type Span, type Tracer } from '@opentelemetry/api';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import { redactCallPath } from '#core/billing';
import { traceparentOf } from '#core/platform';

/**
 * The spans of one metered call, children of the span that is active when the call starts (the
 * edge's request span): `charge`, the upstream exchange (`upstream GET`, a client span) and the
 * hand-off of its usage event (`usage-events publish`), whose context the event carries to the usage
 * worker. Made only when tracing is on: MeteredCall holds no CallTrace otherwise.
 *
 * What a span may say (docs/decisions/tracing-attributes.md): ids, the API, the method, the upstream's
 * host, the path as the activity log redacts it, statuses and error codes. Never a key, a token, a
 * query string, a header or a body.
 */
export class CallTrace {
  private readonly parent: Context = context.active();
  private upstream: Span | null = null;

  constructor(
    private readonly tracer: Tracer,
    private readonly apiId: string,
  ) {}

  /** Spans the charge; `charging` is the door's charge, already under way. */
  async charge<T>(charging: Promise<T>, accountId: string, costMicros: bigint): Promise<T> {
    const span = this.tracer.startSpan('charge', undefined, this.parent);
    if (span.isRecording()) {
      span.setAttributes({ 'platform.api_id': this.apiId, 'platform.account_id': accountId, 'platform.cost_micros': Number(costMicros) });
    }
    try {
      return await charging;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      span.setStatus({ code: SpanStatusCode.ERROR });
      if (span.isRecording()) span.setAttribute(ATTR_ERROR_TYPE, typeof code === 'string' ? code : 'error');
      throw error;
    } finally {
      span.end();
    }
  }

  /** The request leaves for the upstream (again, after an OAuth 401: the first exchange ends there). */
  upstreamStarted(method: string, origin: string, path: string): void {
    this.upstreamEnded(401, null);
    const span = this.tracer.startSpan(`upstream ${method}`, { kind: SpanKind.CLIENT }, this.parent);
    if (span.isRecording()) {
      const url = new URL(origin);
      span.setAttributes({
        'platform.api_id': this.apiId,
        [ATTR_HTTP_REQUEST_METHOD]: method,
        [ATTR_SERVER_ADDRESS]: url.hostname,
        [ATTR_SERVER_PORT]: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
        [ATTR_URL_PATH]: redactCallPath(path) ?? '/',
      });
    }
    this.upstream = span;
  }

  /** The exchange is over: the upstream's status (null when it never answered) and the platform's error code when the call failed. */
  upstreamEnded(status: number | null, errorCode: string | null): void {
    const span = this.upstream;
    if (!span) return;
    this.upstream = null;
    if (span.isRecording()) {
      if (status !== null) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (errorCode !== null) span.setAttribute(ATTR_ERROR_TYPE, errorCode);
      else if (status !== null && status >= 500) span.setAttribute(ATTR_ERROR_TYPE, String(status));
    }
    if (errorCode !== null || (status !== null && status >= 500)) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  /**
   * The call's usage event is handed to the usage queue: a producer span, and its `traceparent` for
   * the event to carry (undefined when the trace is not sampled: the worker then has nothing to continue).
   */
  usageRecorded(outcome: string, status: number): string | undefined {
    const span = this.tracer.startSpan('usage-events publish', { kind: SpanKind.PRODUCER }, this.parent);
    if (!span.isRecording()) {
      span.end();
      return undefined;
    }
    span.setAttributes({
      'messaging.system': 'bullmq',
      'messaging.destination.name': 'usage-events',
      'messaging.operation.type': 'publish',
      'platform.api_id': this.apiId,
      'platform.outcome': outcome,
      [ATTR_HTTP_RESPONSE_STATUS_CODE]: status,
    });
    span.end();
    return traceparentOf(span);
  }
}
