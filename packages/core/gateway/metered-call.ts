import { Readable, Transform } from 'node:stream';
import type { Tracer } from '@opentelemetry/api';
import type { MeteredApi } from '#db/metered-apis';
import type { ChargeReceipt, PricedCall, RefundOutcome, UsageSink } from '#core/billing';
import type { Caller } from '#core/identity';
import { formatDollars } from '#contracts/money';
import { notFound, PlatformError, readBounded } from '#core/platform';
import { CallTrace } from './call-trace.js';
import type { SealedConnectionKeys } from './connection-cache.js';
import {
  droppedRequestHeaders,
  planMeteredCall,
  upstreamFailure,
  withRenewedBearer,
  type MeteredCallPlan,
  type OAuthBearerSource,
  type PlanSettings,
} from './call-plan.js';
import { bodyDecoder, redactResponseHeaders } from './platform-key-guard.js';
import { MIN_LEAK, SecretRedactor } from './redaction.js';
import { doorLocation } from './redirects.js';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './upstream.js';

/**
 * The metered call, whatever door it came through (the REST proxy, MCP's call_api): it plans the
 * call, has it charged, forwards it, keeps the platform's secrets out of the answer, hands the
 * answer to the caller's sink, and settles the charge.
 *
 * The money rule lives here and only here: every charge ends in exactly one settlement, either
 * "served" (one usage event at the call's cost) or "refunded" (the refund, and one usage event at
 * cost 0 that records the failure). See `Settlement`.
 */

/** What the metered call needs of the edge's settings. */
export interface MeteredCallSettings extends PlanSettings {
  PROXY_BODY_LIMIT_BYTES: number;
  PROXY_MAX_CALL_MS: number;
  PROXY_HEADERS_TIMEOUT_MS: number;
  PROXY_RETRY_AFTER_SECONDS: number;
}

/** One request to an upstream, as the HTTP client (the edge's undici Agent) takes it. */
export interface UpstreamRequest {
  origin: string;
  path: string;
  method: string;
  /** Flat name, value pairs. */
  headers: string[];
  body: Readable | null;
  /** The call's time limits: the client binds the request to it, and it stops the request when time runs out. */
  deadline: UpstreamDeadline;
}

/** What the call's deadline stops: the request, in whatever phase it is. */
export interface Abortable {
  abort(reason: Error): void;
}

/** The call's deadline as the HTTP client sees it (see CallDeadline). */
export interface UpstreamDeadline {
  /** Stops `request` when the deadline passes (at once if it has). One request per deadline. */
  bind(request: Abortable): void;
}

export interface UpstreamResponse {
  statusCode: number;
  /** By lower-case name, as undici (and node:http) give them. */
  headers: Record<string, string | string[] | undefined>;
  body: UpstreamBody;
}

/**
 * Where an answer's chunks go when the body is sent straight to the caller (AnswerSink.deliverChunks).
 * `write` returns false when the caller's side is full: the body then waits for `resume`.
 */
export interface ChunkWriter {
  write(chunk: Buffer): boolean;
  end(): void;
  /** The upstream broke off mid-answer: the caller's answer is cut. */
  fail(error: Error): void;
}

/** An answer's body sent chunk by chunk, with no stream in between. */
export interface ChunkedBody {
  /** Starts the flow into `writer` (once). */
  sendTo(writer: ChunkWriter): void;
  /** Continues after `write` returned false. */
  resume(): void;
  /** Stops reading (the caller went away) and releases the upstream's connection. */
  destroy(): void;
}

/**
 * The upstream's answer body, read one of two ways: sent straight to the caller chunk by chunk (the
 * common case: an answer that needs no decoding or redaction, to a sink that can write it), or as a
 * stream, made on first use (redaction, decoding, error excerpts, MCP's bounded read, dropping it).
 */
export interface UpstreamBody extends ChunkedBody {
  stream(): Readable;
  /** Bytes handed to `sendTo`'s writer. */
  readonly bytesSent: number;
  /** True when the upstream broke off on its own: not stopped by `destroy`, the stream's destruction or the deadline. */
  readonly broken: boolean;
}

/** The HTTP client the call is forwarded with. Failures are classified by `classifyFailure`. */
export interface UpstreamClient {
  request(request: UpstreamRequest): Promise<UpstreamResponse>;
  /** Maps what `request` threw to the caller's answer (unreachable, timed out, private address, ...). */
  classifyFailure(error: unknown): { failure: PlatformError; timedOut: boolean };
}

/** How a metered call ended, for metrics: bounded, one of these. */
export type CallOutcome = 'charged' | 'upstream_4xx' | 'upstream_5xx' | 'timeout' | 'unreachable' | 'refunded' | 'payment_required' | 'refused';

/** What a metered call tells the process's metrics when it ends; must return at once and never throw. */
export type CallObserver = (call: { apiId: string; outcome: CallOutcome; upstreamSeconds: number | null; costMicros: bigint }) => void;

/** Where the upstream's answer goes: the HTTP reply, or the bounded buffer of an MCP tool result. */
export interface AnswerSink {
  /** True once the caller has gone away (hung up before the answer began). */
  readonly closed: boolean;
  /**
   * Sends the upstream's status, headers (already filtered and redacted) and body (null for 204 and
   * 304). Resolves when delivery is over: true when the caller took what it asked for, false when it
   * went away first. A sink that stops reading before the body's end (the caller hung up, or MCP's
   * cap was reached) calls `stopping` first, before anything is torn down, so the upstream body's
   * abort is not taken for the upstream breaking off; it then destroys `body`.
   */
  deliver(status: number, headers: Record<string, string | string[]>, body: Readable | null, stopping: () => void): Promise<boolean>;
  /**
   * Optional: sends the answer with its body written chunk by chunk (see ChunkedBody); null when this
   * answer must go through `deliver` (the sink's own reasons). Resolves as `deliver` does. When the
   * caller goes away first, the sink destroys `body` (no `stopping`: the body knows who stopped it).
   */
  deliverChunks?(status: number, headers: Record<string, string | string[]>, body: ChunkedBody): Promise<boolean> | null;
  /** Ends delivery at once (the call's deadline passed while the answer was still going out). */
  abort(): void;
}

export interface MeteredCallRequest {
  caller: Caller;
  apiId: string;
  method: string;
  /** The path under the API's base URL and the query string, as the caller spelled them (see proxyTarget). */
  target: { path: string; query: string | null };
  /** The caller's request headers, flat name, value pairs; the upstream gets them filtered. */
  headers: string[];
  /**
   * The body: a stream (the REST proxy's request, forwarded as it arrives, never buffered), or a
   * Buffer already whole in memory (MCP's call_api). Only a call without a body or with a Buffer can
   * be sent again, which an OAuth call refused 401 is once with a renewed token (see `forward`).
   */
  body: Readable | Buffer | null;
  /** Content-Length as declared, 0 when none. */
  declaredLength: number;
  /** Charges the planned price (the door's own rules: X-Max-Cost, x402, ...). Nothing is forwarded before it returns. */
  charge(call: PricedCall): Promise<ChargeReceipt>;
  sink: AnswerSink;
  /** Where the door's space starts, for the upstream's redirects (see doorLocation): `/api/v1/proxy/{api_id}`, or '' for MCP. */
  doorBase: string;
  /** The request id the caller's answer carries (X-Request-Id), kept with the call's usage event. */
  requestId?: string;
  /** What the usage event names as paid, asked when it is recorded (x402 pays on the way out). Default: the receipt, from the balance. */
  paid?(receipt: ChargeReceipt, costMicros: bigint): { costMicros: bigint; chargeId: string | null; paidWith?: 'balance' | 'x402' };
}

export interface MeteredCallResult {
  api: MeteredApi;
  receipt: ChargeReceipt;
  status: number;
  /** False when the caller went away before the whole answer (it keeps its charge: the upstream did its work). */
  delivered: boolean;
  /** True when the upstream broke off mid-answer, so the charge was refunded. */
  refunded: boolean;
}

export interface MeteredCallDeps {
  settings: MeteredCallSettings;
  apis: { get(apiId: string): Promise<MeteredApi | null> };
  connections: SealedConnectionKeys;
  /** The callers' OAuth connections (core/oauth); without it OAuth APIs take only keys. */
  oauth?: OAuthBearerSource;
  upstream: UpstreamClient;
  /** Refunds a charge now, or queues the refund; never throws. */
  refund(chargeId: string, reason: string, accountId: string): Promise<RefundOutcome>;
  usage: UsageSink;
  log: { warn(object: Record<string, unknown>, message: string): void };
  observe?: CallObserver;
  /** Given when tracing is on (core/platform's Tracing): each call then makes its spans (CallTrace). Absent, a call does no tracing work. */
  tracer?: Tracer;
}

/** How many OAuth tokens' redactors an edge keeps before starting over. */
const MAX_TOKEN_REDACTORS = 1_000;

/** How much of a failing upstream's body the 502 carries. */
export const UPSTREAM_EXCERPT_BYTES = 2_048;

export class MeteredCall {
  /** One redactor per platform key, kept while the API row is cached (a new row is a new object). */
  private readonly redactors = new WeakMap<MeteredApi, SecretRedactor>();
  /** One redactor per OAuth access token in use (tokens change as they are renewed: bounded, started over when full). */
  private readonly tokenRedactors = new Map<string, SecretRedactor>();

  constructor(private readonly deps: MeteredCallDeps) {}

  async run(request: MeteredCallRequest): Promise<MeteredCallResult> {
    const { settings } = this.deps;
    const started = performance.now();
    const api = await this.deps.apis.get(request.apiId);
    if (!api) throw notFound(`API ${request.apiId}`, 'List APIs with GET /api/v1/apis.');
    if (request.declaredLength > settings.PROXY_BODY_LIMIT_BYTES) throw bodyTooLarge(settings.PROXY_BODY_LIMIT_BYTES);
    const plan = await planMeteredCall(
      this.deps.connections,
      settings,
      api,
      request.caller.accountId,
      {
        method: request.method,
        path: request.target.path,
        query: request.target.query,
        headers: request.headers,
      },
      this.deps.oauth ?? null,
    );
    const trace = this.deps.tracer ? new CallTrace(this.deps.tracer, api.id) : null;
    // Nothing is forwarded before the charge (and the door's own checks) passed.
    let receipt: ChargeReceipt;
    try {
      const charging = request.charge({ costMicros: plan.costMicros, item: 'proxy', apiId: api.id, description: `${request.method} ${plan.path}` });
      receipt = await (trace ? trace.charge(charging, request.caller.accountId, plan.costMicros) : charging);
    } catch (error) {
      const code = (error as PlatformError).code;
      const outcome = code === 'insufficient_balance' || code === 'payment_invalid' ? 'payment_required' : 'refused';
      this.deps.observe?.({ apiId: api.id, outcome, upstreamSeconds: null, costMicros: 0n });
      throw error;
    }
    const settlement = new Settlement(this.deps, request, api, receipt, started, plan.path, trace);
    return this.forward(request, plan, settlement);
  }

  private redactorFor(plan: MeteredCallPlan): SecretRedactor | null {
    if (!plan.secretKey || plan.key === null || plan.key.length < 4) return null;
    if (plan.oauth) {
      let redactor = this.tokenRedactors.get(plan.key);
      if (!redactor) {
        if (this.tokenRedactors.size >= MAX_TOKEN_REDACTORS) this.tokenRedactors.clear();
        redactor = new SecretRedactor([plan.key]);
        this.tokenRedactors.set(plan.key, redactor);
      }
      return redactor;
    }
    let redactor = this.redactors.get(plan.api);
    if (!redactor) {
      redactor = new SecretRedactor([plan.key]);
      this.redactors.set(plan.api, redactor);
    }
    return redactor;
  }

  private async forward(request: MeteredCallRequest, plan: MeteredCallPlan, settlement: Settlement, retry = false): Promise<MeteredCallResult> {
    const { settings } = this.deps;
    const { api } = plan;
    const deadline = new CallDeadline(settings, () => {
      // The answer's last bytes may be queued for a caller who stopped reading: the sink is closed too.
      if (streaming) request.sink.abort();
    });
    let streaming = false;

    // Not forwarded: the header the upstream auth sets; Content-Length without a body; Accept-Encoding
    // on a platform-key or OAuth call (its answer is redacted byte by byte, so it must come uncompressed).
    const headers = upstreamRequestHeaders(request.headers, droppedRequestHeaders(plan, request.body !== null));
    if (plan.authHeader) headers.push(...plan.authHeader);
    if (plan.secretKey) headers.push('accept-encoding', 'identity');
    const body = request.body
      ? this.countedBody(Buffer.isBuffer(request.body) ? Readable.from([request.body]) : request.body, settlement, deadline)
      : null;
    if (!body) deadline.forwardedWhole();

    let upstream: UpstreamResponse;
    const forwarded = performance.now();
    settlement.trace?.upstreamStarted(request.method, plan.origin, plan.path);
    try {
      upstream = await this.deps.upstream.request({
        origin: plan.origin,
        path: plan.upstreamPath,
        method: request.method,
        headers,
        body,
        deadline,
      });
    } catch (error) {
      deadline.clear();
      const { failure, timedOut } = deadline.expiredIn === 'upload' ? { failure: callTooLong(settings), timedOut: true } : this.failureOf(error);
      this.deps.log.warn({ apiId: api.id, code: failure.code, err: error }, 'proxy call failed before the upstream answered');
      throw await settlement.refund(
        failure,
        failure.status,
        timedOut ? 'timeout' : failure.code === 'payload_too_large' ? 'refunded' : 'unreachable',
      );
    }
    deadline.answered();
    settlement.upstreamSeconds = (performance.now() - forwarded) / 1000;
    settlement.upstreamStatus = upstream.statusCode;

    if (upstream.statusCode === 401 && plan.oauthBearer && !retry) {
      const renewed = await this.renewedAfter401(request, plan);
      if (renewed && !deadline.expired) {
        // The same call sent again with the renewed token: the 401 is dropped unread and the one
        // charge is settled by the retry's outcome. The caller's bytes are counted once.
        upstream.body.destroy();
        deadline.clear();
        settlement.bytesIn = 0;
        return this.forward(request, renewed, settlement, true);
      }
    }

    const redactor = this.redactorFor(plan);
    const decoder = redactor ? bodyDecoder(upstream.headers['content-encoding']) : null;
    if (decoder === 'unsupported') {
      upstream.body.destroy();
      deadline.clear();
      throw await settlement.refund(
        new PlatformError(
          'upstream_error',
          `${api.id} answered in an encoding the proxy cannot read (${String(upstream.headers['content-encoding'])})`,
          {
            hint: 'The call was refunded. Answers to calls made with the platform key or an OAuth token must be readable so the key can be kept out of them.',
            details: {},
          },
        ),
        502,
        'refunded',
      );
    }

    if (upstream.statusCode >= 500) {
      const stream = upstream.body.stream();
      const source = decoder ? decoded(stream, decoder) : stream;
      const excerpt = await readExcerpt(source, redactor);
      if (source !== stream) stream.destroy();
      deadline.clear();
      const failure = upstreamFailure(
        api.id,
        upstream.statusCode,
        excerpt,
        retryAfter(upstream.headers['retry-after'], settings.PROXY_RETRY_AFTER_SECONDS),
      );
      throw await settlement.refund(failure, failure.status, 'upstream_5xx');
    }

    const passed = downstreamResponseHeaders(upstream.headers);
    const answerHeaders = redactor ? redactResponseHeaders(passed, redactor, plan.keyParameter) : passed;
    // One property read, no pass over the headers: the HTTP client (undici) names them in lower case.
    const location = answerHeaders.location;
    if (typeof location === 'string') answerHeaders.location = doorLocation(location, plan, request.doorBase);
    if (redactor) deleteHeader(answerHeaders, 'content-length');
    if (decoder) deleteHeader(answerHeaders, 'content-encoding');

    // A caller who hung up while the upstream was still answering keeps the charge: the upstream did its work.
    if (request.sink.closed) {
      upstream.body.destroy();
      decoder?.destroy();
      deadline.clear();
      settlement.served(upstream.statusCode);
      return { api, receipt: settlement.receipt, status: upstream.statusCode, delivered: false, refunded: false };
    }
    if (upstream.statusCode === 204 || upstream.statusCode === 304) {
      decoder?.destroy();
      await drain(upstream.body.stream());
      const delivered = await request.sink.deliver(upstream.statusCode, answerHeaders, null, () => {});
      deadline.clear();
      settlement.served(upstream.statusCode);
      return { api, receipt: settlement.receipt, status: upstream.statusCode, delivered, refunded: false };
    }

    // The common answer (nothing to decode or redact) goes to a sink that writes chunks straight from
    // the upstream's body: no stream between them, its bytes counted by the body.
    streaming = true;
    if (!redactor) {
      const direct = request.sink.deliverChunks?.(upstream.statusCode, answerHeaders, upstream.body);
      if (direct) {
        const delivered = await direct;
        settlement.bytesOut = upstream.body.bytesSent;
        return this.delivered(plan, settlement, deadline, upstream.statusCode, delivered, upstream.body.broken);
      }
    }

    // Else the caller gets the upstream body as a stream, or the end of the decoder and redaction chain.
    // Its bytes are counted as they leave it, by a listener added while it is paused (so nothing flows
    // before the sink reads it), with no stream in between.
    const stream = upstream.body.stream();
    const source = decoder ? decoded(stream, decoder) : stream;
    const answer: Readable = redactor ? source.pipe(redactor.stream()) : source;
    let upstreamBroke = false;
    let callerGone = false;
    source.on('error', (error: Error) => {
      // Cut at the deadline, or because the caller left: the call keeps its charge.
      if (!callerGone && !deadline.expired) upstreamBroke = true;
      if (answer !== source) answer.destroy(error);
    });
    // A chain's head (the upstream body) and middle (a decoder) go with its end.
    if (answer !== stream) answer.once('close', () => tearDown(stream, source, answer));
    answer.pause();
    answer.on('data', (chunk: Buffer) => {
      settlement.bytesOut += chunk.length;
    });
    const delivered = await request.sink.deliver(upstream.statusCode, answerHeaders, answer, () => {
      callerGone = !upstreamBroke;
    });
    // (A source error raised by the same teardown was seen already: the sinks resolve after it.)
    return this.delivered(plan, settlement, deadline, upstream.statusCode, delivered, upstreamBroke);
  }

  /** The end of a call whose answer began: kept, or refunded when the upstream broke off mid-answer. */
  private async delivered(
    plan: MeteredCallPlan,
    settlement: Settlement,
    deadline: CallDeadline,
    status: number,
    delivered: boolean,
    upstreamBroke: boolean,
  ): Promise<MeteredCallResult> {
    const { api } = plan;
    deadline.clear();
    if (!delivered && deadline.expired) {
      this.deps.log.warn(
        { apiId: api.id, maxCallMs: this.deps.settings.PROXY_MAX_CALL_MS, bytesOut: settlement.bytesOut },
        'proxied answer cut at its deadline; the call keeps its charge',
      );
    }
    if (upstreamBroke) {
      // The upstream closed mid-answer: the caller got a cut-off answer, and the charge is returned.
      await settlement.refund(
        new PlatformError('upstream_error', `${api.id} closed the connection mid-answer`, { hint: 'The call was refunded.', details: {} }),
        502,
        'upstream_5xx',
      );
      return { api, receipt: settlement.receipt, status: 502, delivered: false, refunded: true };
    }
    settlement.served(status);
    return { api, receipt: settlement.receipt, status, delivered, refunded: false };
  }

  /**
   * The upstream refused a call's OAuth token (401): the token is renewed once, single-flight across
   * edges (OAuthBearerSource.renewRefused), and the plan of the retry returned when the call can be
   * sent again (no body, or one whole in memory). A streamed body is gone: the 401 is answered, and
   * the renewal still stands for the caller's next call. Null: answer the 401 as it came.
   */
  private async renewedAfter401(request: MeteredCallRequest, plan: MeteredCallPlan): Promise<MeteredCallPlan | null> {
    const oauth = this.deps.oauth;
    if (!oauth || !plan.oauthBearer) return null;
    const bearer = await oauth.renewRefused(request.caller.accountId, plan.oauthBearer);
    const replayable = request.body === null || Buffer.isBuffer(request.body);
    const retried = bearer && replayable ? withRenewedBearer(plan, bearer) : null;
    this.deps.log.warn(
      { apiId: plan.api.id, connectionId: plan.oauthBearer.connectionId, renewed: bearer !== null, retried: retried !== null },
      'upstream refused the OAuth access token (401)',
    );
    return retried;
  }

  /** The caller's body on its way upstream: counted against the size limit, and its end marks the call "forwarded whole". */
  private countedBody(raw: Readable, settlement: Settlement, deadline: CallDeadline): Transform {
    const limit = this.deps.settings.PROXY_BODY_LIMIT_BYTES;
    const body = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        settlement.bytesIn += chunk.length;
        if (settlement.bytesIn > limit) callback(new BodyTooLarge());
        else callback(null, chunk);
      },
      flush(callback) {
        deadline.forwardedWhole();
        callback();
      },
    });
    raw.on('error', (error) => body.destroy(error));
    raw.pipe(body);
    return body;
  }

  private failureOf(error: unknown): { failure: PlatformError; timedOut: boolean } {
    if (error instanceof DeadlinePassed) return this.deps.upstream.classifyFailure(new UpstreamSilent());
    if (error instanceof BodyTooLarge || (error as { cause?: unknown })?.cause instanceof BodyTooLarge)
      return { failure: bodyTooLarge(this.deps.settings.PROXY_BODY_LIMIT_BYTES), timedOut: false };
    return this.deps.upstream.classifyFailure(error);
  }
}

/**
 * The one place a charge is settled, exactly once: `served` records the call's usage at its cost;
 * `refund` returns the charge (now, or through the refund queue) and records the usage at cost 0.
 * A second settlement of the same call is ignored, so no path can both refund and keep a charge.
 */
class Settlement {
  bytesIn = 0;
  bytesOut = 0;
  /** Seconds from forwarding to the upstream's answer headers, once it answered. */
  upstreamSeconds: number | null = null;
  /** The upstream's status, once it answered. */
  upstreamStatus: number | null = null;
  private settled = false;

  constructor(
    private readonly deps: MeteredCallDeps,
    private readonly request: MeteredCallRequest,
    private readonly api: MeteredApi,
    readonly receipt: ChargeReceipt,
    private readonly started: number,
    /** The canonical path under the API's base URL (no query string); the usage worker redacts it. */
    private readonly path: string,
    /** The call's spans, when tracing is on. */
    readonly trace: CallTrace | null,
  ) {}

  served(status: number): void {
    if (!this.claim()) return;
    this.trace?.upstreamEnded(status, null);
    this.record(status, this.receipt.costMicros, null);
    this.deps.observe?.({
      apiId: this.api.id,
      outcome: status >= 400 ? 'upstream_4xx' : 'charged',
      upstreamSeconds: this.upstreamSeconds,
      costMicros: this.receipt.costMicros,
    });
  }

  /** Refunds the charge and says so on `failure` (details, and the X-Service-* headers of the refund); returns it. */
  async refund(failure: PlatformError, status: number, outcome: CallOutcome): Promise<PlatformError> {
    if (!this.claim()) return failure;
    this.trace?.upstreamEnded(this.upstreamStatus, failure.code);
    this.deps.observe?.({ apiId: this.api.id, outcome, upstreamSeconds: this.upstreamSeconds, costMicros: 0n });
    const chargeId = this.receipt.chargeId;
    if (chargeId) {
      const refund = await this.deps.refund(chargeId, `refund: ${failure.code}`, this.request.caller.accountId);
      if (refund.refunded) {
        if (failure.details) Object.assign(failure.details, { chargeId, refundId: refund.refundId });
        failure.headers = {
          ...failure.headers,
          'X-Service-Cost': '0',
          'X-Service-Balance': formatDollars(refund.balanceMicros),
          'X-Service-Refund-Id': refund.refundId,
        };
      } else if (failure.details) {
        Object.assign(failure.details, { chargeId, refund: 'pending' });
      }
    }
    this.record(status, 0n, failure.code);
    return failure;
  }

  private claim(): boolean {
    if (this.settled) return false;
    this.settled = true;
    return true;
  }

  /** The call's usage event; `errorCode` is set when the charge was refunded (or the call, unpaid, failed). */
  private record(status: number, costMicros: bigint, errorCode: string | null): void {
    const paid = this.request.paid ? this.request.paid(this.receipt, costMicros) : { costMicros, chargeId: this.receipt.chargeId };
    // Refunded: a charge to the balance was returned. A call that failed unpaid (free, or x402 not
    // settled) is only failed.
    const refunded = errorCode !== null && this.receipt.chargeId !== null;
    const chargedMicros = refunded ? this.receipt.costMicros : paid.costMicros;
    const outcome = refunded ? 'refunded' : errorCode !== null || status >= 400 ? 'failed' : 'served';
    const event: Parameters<UsageSink['record']>[0] = {
      method: this.request.method,
      path: this.path,
      outcome,
      errorCode,
      chargedMicros: chargedMicros.toString(),
      paidWith: chargedMicros > 0n ? (paid.paidWith ?? 'balance') : null,
      accountId: this.request.caller.accountId,
      keyId: this.request.caller.keyId,
      apiId: this.api.id,
      item: 'proxy',
      status,
      latencyMs: Math.round(performance.now() - this.started),
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      costMicros: paid.costMicros.toString(),
      chargeId: paid.chargeId,
      holdId: this.receipt.holdId,
      at: new Date().toISOString(),
      requestId: this.request.requestId ?? null,
    };
    // A traced call's event carries its usage span's context to the usage worker.
    if (this.trace) event.traceparent = this.trace.usageRecorded(outcome, status);
    this.deps.usage.record(event);
  }
}

type CallPhase = 'upload' | 'wait' | 'download';

/**
 * The time limits of a call, one per phase, so that lateness the caller causes never turns into a
 * refund and no call outlives the workers' reconciler (which refunds a charge with no recorded
 * outcome after REFUND_RECONCILE_AFTER_SECONDS, so an answer read slowly for ever would be free):
 * - upload: the caller has PROXY_MAX_CALL_MS from the charge to hand over its whole body. Past it
 *   the upstream never had the whole request: refunded.
 * - wait: once the request is forwarded whole, the upstream answers within its headers timeout
 *   (undici's, with a margin here), however long the upload took. Its silence is its failure:
 *   refunded, as every upstream failure is.
 * - download: the caller has PROXY_MAX_CALL_MS from the answer's start to read it. Past it the
 *   answer is cut and the call keeps its charge: the upstream did its work.
 */
class CallDeadline implements UpstreamDeadline {
  private timer: NodeJS.Timeout | null = null;
  /** The upstream request, once the HTTP client bound it: stopped when time runs out. */
  private request: Abortable | null = null;
  phase: CallPhase = 'upload';
  /** The phase in which time ran out, or null. */
  expiredIn: CallPhase | null = null;

  constructor(
    private readonly settings: MeteredCallSettings,
    private readonly onExpiry: () => void,
  ) {
    this.arm(settings.PROXY_MAX_CALL_MS);
  }

  get expired(): boolean {
    return this.expiredIn !== null;
  }

  bind(request: Abortable): void {
    this.request = request;
    if (this.expired) request.abort(new DeadlinePassed());
  }

  forwardedWhole(): void {
    if (this.phase !== 'upload' || this.expired) return;
    this.phase = 'wait';
    this.arm(this.settings.PROXY_HEADERS_TIMEOUT_MS + 5_000);
  }

  answered(): void {
    if (this.expired) return;
    this.phase = 'download';
    this.arm(this.settings.PROXY_MAX_CALL_MS);
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.request = null;
  }

  private arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.expiredIn = this.phase;
      this.request?.abort(new DeadlinePassed());
      this.onExpiry();
    }, ms);
  }
}

/** The reason a request is stopped when the call's deadline passes. */
class DeadlinePassed extends Error {
  override name = 'DeadlinePassed';
}

/** The wait phase's own limit passed (the HTTP client's headers timeout should have come first). */
export class UpstreamSilent extends Error {
  override name = 'UpstreamSilent';
}

class BodyTooLarge extends Error {
  override name = 'BodyTooLarge';
}

function bodyTooLarge(limit: number) {
  return new PlatformError('payload_too_large', `The request body is larger than the proxy limit of ${limit} bytes`, {
    hint: 'Send a smaller body. A call refused for its size is not charged (or is refunded).',
    details: {},
  });
}

/** A call the deadline ended before the upstream answered (its body was still arriving). */
function callTooLong(settings: MeteredCallSettings): PlatformError {
  return new PlatformError(
    'upstream_unavailable',
    `The call did not complete within ${settings.PROXY_MAX_CALL_MS / 1000} s, the longest a proxied call may take`,
    {
      hint: 'The call was refunded: its request body had not all arrived. Retry after the number of seconds in Retry-After, or send the body faster.',
      headers: { 'Retry-After': String(settings.PROXY_RETRY_AFTER_SECONDS) },
      details: {},
    },
  );
}

function retryAfter(given: string | string[] | undefined, fallback: number): string {
  const value = Array.isArray(given) ? given[0] : given;
  return value && /^\d{1,4}$/.test(value.trim()) ? value.trim() : String(fallback);
}

function deleteHeader(headers: Record<string, string | string[]>, name: string): void {
  for (const key of Object.keys(headers)) if (key.toLowerCase() === name) delete headers[key];
}

/** Reads a body that should be empty (204, 304) to its end, so the connection can be reused. */
async function drain(body: Readable): Promise<void> {
  try {
    for await (const _chunk of body) {
      // discarded
    }
  } catch {
    // Nothing was promised to the caller from it.
  }
}

/** A body through its decoder; the decoder fails with it. */
function decoded(body: Readable, decoder: Transform): Readable {
  body.on('error', (error) => decoder.destroy(error));
  return body.pipe(decoder);
}

/** Destroys what is left of an answer's chain once its end closed. */
function tearDown(body: Readable, source: Readable, end: Readable) {
  if (!body.readableEnded) body.destroy();
  if (source !== body && source !== end) source.destroy();
}

/**
 * The first UPSTREAM_EXCERPT_BYTES of an upstream error body as text; the rest is discarded. A few
 * bytes more are read than kept and redacted before the cut, so a secret crossing the cut is seen
 * whole (see SecretRedactor); nothing beyond that is ever held.
 */
export async function readExcerpt(body: Readable, redactor: SecretRedactor | null): Promise<string> {
  const { bytes } = await readBounded(body, UPSTREAM_EXCERPT_BYTES + MIN_LEAK * 8);
  return (redactor ? redactor.redact(bytes) : bytes).subarray(0, UPSTREAM_EXCERPT_BYTES).toString('utf8');
}

/** A body of bytes for an upstream request made by a program (MCP's call_api), not streamed from a socket. */
export function bodyOf(payload: Buffer | string | undefined): Readable | null {
  return payload === undefined ? null : Readable.from([Buffer.from(payload)]);
}
