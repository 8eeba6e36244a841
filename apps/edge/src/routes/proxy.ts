import { Transform } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validatorCompiler, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import { z } from 'zod';
import { errorResponses } from './error-responses.js';
import { notFound, PlatformError } from '#core/platform';
import { getBalance } from '#db/ledger';
import { formatDollars } from '#contracts/money';
import type { ChargeReceipt } from '#core/billing';
import { chargeRequest } from '../http/charge.js';
import {
  bodyDecoder,
  downstreamResponseHeaders,
  droppedRequestHeaders,
  guardedLookup,
  planMeteredCall,
  PrivateUpstreamError,
  proxyTarget,
  redactingStream,
  redactResponseHeaders,
  redactSecret,
  upstreamFailure,
  upstreamRequestHeaders,
} from '#core/gateway';
import { requireAuth } from '../plugins/auth.js';
import { apiId as API_ID, API_ID_PATTERN } from '#contracts/directory';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** `/api/v1/proxy/{api_id}`: segments of the raw URL before the path remainder. */
const SEGMENTS_BEFORE_REMAINDER = 4;
/** How much of a failing upstream's body the 502 carries. */
const UPSTREAM_ERROR_BODY_BYTES = 2_048;

class BodyTooLarge extends Error {
  override name = 'BodyTooLarge';
}

/**
 * The metered proxy. Registered as its own encapsulated plugin: every content type is passed
 * through as the raw request stream (never parsed or buffered), with its own size limit.
 */
const proxyRoutes: FastifyPluginAsyncZod = async (app) => {
  const { settings } = app.deps;
  const agent = new Agent({
    keepAliveTimeout: 10_000,
    connections: 256,
    headersTimeout: settings.PROXY_HEADERS_TIMEOUT_MS,
    bodyTimeout: settings.PROXY_BODY_TIMEOUT_MS,
    connect: settings.ALLOW_PRIVATE_UPSTREAMS
      ? { timeout: settings.PROXY_CONNECT_TIMEOUT_MS }
      : { timeout: settings.PROXY_CONNECT_TIMEOUT_MS, lookup: guardedLookup as never },
  });
  app.addHook('onClose', async () => agent.close());
  // Proxied answers are third-party content on the dashboard's origin: the browser must treat every
  // one of them (errors too) as an opaque, script-less document that other sites cannot embed.
  // (Set last, over any the upstream sent; with `done`, so no promise per call.)
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('Content-Security-Policy', "sandbox; default-src 'none'");
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Cross-Origin-Resource-Policy', 'same-site');
    done(null, payload);
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  const schema = {
    tags: ['proxy'],
    summary: 'Call a third-party API through the metered proxy',
    description:
      'The path after the API id, the query string and the body reach the upstream unchanged. The call is charged before it is ' +
      'forwarded; 502/503 answers are refunded. Send X-Max-Cost (dollars) to refuse a call that would cost more.',
    // The upstream's own answers pass through as they are; these are the proxy's own failures.
    response: { ...errorResponses(502, 503) },
  };
  app.route({
    method: [...METHODS],
    url: '/proxy/:apiId/*',
    config: { auth: 'apiKey', priced: true, sampledRequestLog: true },
    schema: { ...schema, params: z.object({ apiId: API_ID, '*': z.string() }) },
    validatorCompiler: paramsValidator(true),
    handler: async (request, reply) => proxyCall(request, reply, request.params.apiId, agent),
  });
  // The API's base URL itself (`/proxy/{api_id}` or `/proxy/{api_id}/`, the router ignores the trailing slash).
  app.route({
    method: [...METHODS],
    url: '/proxy/:apiId',
    config: { auth: 'apiKey', priced: true, sampledRequestLog: true },
    schema: { ...schema, params: z.object({ apiId: API_ID }) },
    validatorCompiler: paramsValidator(false),
    handler: async (request, reply) => proxyCall(request, reply, request.params.apiId, agent),
  });
};

async function proxyCall(request: FastifyRequest, reply: FastifyReply, apiId: string, agent: Agent): Promise<FastifyReply> {
  const started = performance.now();
  const auth = requireAuth(request);
  const { sql, settings } = request.server.deps;
  // In-process cache: evicted at once by the operator CLI's changes (Redis pub/sub), else after API_CACHE_TTL_MS.
  const api = await request.server.apiCache.get(apiId);
  if (!api) throw notFound(`API ${apiId}`, 'List APIs with GET /api/v1/apis.');

  const target = proxyTarget(request.raw.url ?? '/', SEGMENTS_BEFORE_REMAINDER);
  const declaredLength = Number(request.headers['content-length'] ?? 0);
  if (declaredLength > settings.PROXY_BODY_LIMIT_BYTES) throw bodyTooLarge(settings.PROXY_BODY_LIMIT_BYTES);
  // The caller's own key, if any, from the in-process connection cache (evicted on every edge when it changes).
  const plan = await planMeteredCall(request.server.connectionCache, settings, api, auth.accountId, { method: request.method, path: target.path, query: target.query });

  // Nothing is forwarded before the charge (and X-Max-Cost, allow-list and spend limit) passed.
  const receipt = await chargeRequest(request, reply, { costMicros: plan.costMicros, item: 'proxy', apiId: api.id, description: `${request.method} ${plan.path}` });
  reply.header('X-Service-Api', api.id);
  if (receipt.balanceMicros === null) reply.header('X-Service-Balance', formatDollars((await getBalance(sql, auth.accountId)) ?? 0n));

  let bytesIn = 0;
  let bytesOut = 0;
  // No call outlives PROXY_MAX_CALL_MS: its usage event (the outcome) is recorded when it ends, and
  // the workers' reconciler refunds a charge that has none after REFUND_RECONCILE_AFTER_SECONDS, so a
  // caller reading an answer slowly for longer would get it for free. Aborting the upstream request
  // ends the call either way: before the answer it fails (refunded), while it streams it is cut.
  const deadline = new AbortController();
  let streaming = false;
  const deadlineTimer = setTimeout(() => {
    deadline.abort();
    // The upstream's body may have ended with its last bytes still queued for a caller who stopped
    // reading: the reply itself is closed too, so the call ends and is recorded.
    if (streaming && !reply.raw.writableFinished) reply.raw.destroy();
  }, settings.PROXY_MAX_CALL_MS);
  const recordUsage = (status: number, netCostMicros: bigint) => {
    clearTimeout(deadlineTimer);
    request.server.usage.record({
      accountId: auth.accountId,
      keyId: auth.keyId,
      apiId: api.id,
      item: 'proxy',
      status,
      latencyMs: Math.round(performance.now() - started),
      bytesIn,
      bytesOut,
      // A call paid with x402 costs only once its payment settled (plugins/x402.ts, before the answer left).
      costMicros: (request.x402Payment && !request.x402Payment.settled ? 0n : netCostMicros).toString(),
      chargeId: receipt.chargeId ?? request.x402Payment?.chargeId ?? null,
      holdId: receipt.holdId,
      at: new Date().toISOString(),
    });
  };

  // Fastify hands the body of POST/PUT/PATCH/DELETE to the catch-all parser; a GET body stays on the raw request.
  const raw = (request.body as IncomingMessage | undefined) ?? (carriesBody(request.raw) ? request.raw : undefined);
  // Not forwarded: the header the upstream auth sets; Content-Length without a body (it would promise
  // bytes that never come); Accept-Encoding on a platform-key call (its answer is redacted byte by byte).
  const headers = upstreamRequestHeaders(request.raw.rawHeaders, droppedRequestHeaders(plan, raw !== undefined));
  if (plan.authHeader) headers.push(...plan.authHeader);
  if (plan.platformKey) headers.push('accept-encoding', 'identity');

  let body: Transform | undefined;
  if (raw) {
    const limit = settings.PROXY_BODY_LIMIT_BYTES;
    body = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bytesIn += chunk.length;
        if (bytesIn > limit) callback(new BodyTooLarge());
        else callback(null, chunk);
      },
    });
    raw.on('error', (error) => body?.destroy(error));
    raw.pipe(body);
  }

  let upstream: Dispatcher.ResponseData;
  try {
    upstream = await agent.request({ origin: plan.origin, path: plan.upstreamPath, method: request.method as Dispatcher.HttpMethod, headers, body: body ?? null, signal: deadline.signal });
  } catch (error) {
    const failure = deadline.signal.aborted
      ? callTooLong(settings.PROXY_MAX_CALL_MS, settings.PROXY_RETRY_AFTER_SECONDS)
      : forwardFailure(error, settings.PROXY_RETRY_AFTER_SECONDS, settings.PROXY_BODY_LIMIT_BYTES);
    await refundInto(request, reply, receipt, failure);
    recordUsage(failure.status, 0n);
    request.log.warn({ apiId: api.id, code: failure.code, err: error }, 'proxy call failed before the upstream answered');
    throw failure;
  }

  // The operator's platform key must never reach the caller, even when an upstream echoes it back
  // (many answer a rejected key with a body quoting it): bodies are read decoded and redacted in
  // flight, header values redacted, and redirects lose the key's query parameter.
  const guard = plan.platformKey && plan.key !== null && plan.key.length >= 4 ? plan.key : null;
  let source: NodeJS.ReadableStream & { destroy(error?: Error): void } = upstream.body;
  let decoded = false;
  if (guard) {
    const decoder = bodyDecoder(upstream.headers['content-encoding']);
    if (decoder === 'unsupported') {
      upstream.body.on('error', () => {}).destroy();
      const failure = new PlatformError('upstream_error', `${api.id} answered in an encoding the proxy cannot read (${String(upstream.headers['content-encoding'])})`, {
        hint: 'The call was refunded. Answers to calls made with the platform key must be readable so the key can be kept out of them.',
        details: {},
      });
      await refundInto(request, reply, receipt, failure);
      recordUsage(failure.status, 0n);
      throw failure;
    }
    if (decoder) {
      upstream.body.on('error', (error) => decoder.destroy(error));
      source = upstream.body.pipe(decoder);
      decoded = true;
    }
  }

  if (upstream.statusCode >= 500) {
    const excerpt = guard ? redactSecret(await readExcerpt(source), guard) : await readExcerpt(source);
    // A decoder in between was torn down by readExcerpt; the upstream's own body goes with it.
    if (source !== upstream.body) upstream.body.destroy();
    const failure = upstreamFailure(api.id, upstream.statusCode, excerpt, retryAfter(upstream.headers['retry-after'], settings.PROXY_RETRY_AFTER_SECONDS));
    await refundInto(request, reply, receipt, failure);
    recordUsage(failure.status, 0n);
    throw failure;
  }

  const redact = guard ? redactingStream(guard) : null;
  reply.code(upstream.statusCode);
  const passed = downstreamResponseHeaders(upstream.headers);
  reply.headers(guard ? redactResponseHeaders(passed, guard, plan.keyParameter) : passed);
  if (redact) reply.removeHeader('content-length');
  if (decoded) reply.removeHeader('content-encoding');
  let upstreamBroke = false;
  let clientGone = false;
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    if (upstreamBroke && receipt.chargeId) {
      // The upstream closed mid-response: the caller got a cut-off answer; the charge is returned
      // (now, or through the refund queue when Postgres refuses it now).
      void request.server.charges
        .refund(receipt.chargeId, 'refund: upstream closed mid-response', request.server.refundQueue, request.log)
        .then(() => recordUsage(502, 0n));
      return;
    }
    // A caller who hangs up mid-download keeps the charge: the upstream did its work.
    recordUsage(upstream.statusCode, receipt.costMicros);
  };
  // A caller who hung up while the upstream was still answering: its reply closed before any
  // listener below could hear it. The upstream did its work, so the call keeps its charge and is
  // recorded now (else it would have no usage event, and the reconciler would refund it).
  if (reply.raw.closed) {
    clientGone = true;
    upstream.body.on('error', () => {}).destroy();
    if (source !== upstream.body) source.destroy();
    settle();
    return reply;
  }
  if (upstream.statusCode === 204 || upstream.statusCode === 304) {
    await upstream.body.dump();
    // Recorded once the answer is out: a call paid with x402 is settled on the way out (onSend), and
    // its usage must name that charge.
    reply.raw.once('finish', settle);
    reply.raw.once('close', settle);
    return reply.send();
  }
  // What the caller gets: the upstream body itself, else the decoder or the redaction at the end of
  // the chain. Fastify pipes it into the reply, destroys the reply when it fails and destroys it when
  // the caller hangs up. Its bytes are counted as they leave it, by a listener added while it is
  // paused (so nothing flows before the reply is piped), with no stream in between.
  const answer = redact ? (source.pipe(redact) as Transform) : source;
  // The source's own error comes first when the upstream breaks; when the caller hangs up, the
  // reply closes first and the upstream body is then torn down. (Piped by hand rather than with
  // stream.pipeline, which allocates an AbortController and a DOMException on every call.)
  source.on('error', (error: Error) => {
    // Cut at the deadline, the answer keeps its charge like one the caller hung up on.
    if (!clientGone && !deadline.signal.aborted) upstreamBroke = true;
    if (answer !== source) answer.destroy(error);
  });
  // A chain's head (the upstream body) and middle (a decoder) go with its end.
  if (answer !== upstream.body) answer.once('close', () => tearDown(upstream.body, source, answer));
  answer.pause();
  answer.on('data', (chunk: Buffer) => {
    bytesOut += chunk.length;
  });
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) {
      clientGone = !upstreamBroke;
      if (deadline.signal.aborted) request.log.warn({ apiId: api.id, maxCallMs: settings.PROXY_MAX_CALL_MS, bytesOut }, 'proxied answer cut at PROXY_MAX_CALL_MS; the call keeps its charge');
    }
    setImmediate(settle);
  });
  streaming = true;
  return reply.send(answer);
}

/** Destroys what is left of an answer's chain once its end closed. */
function tearDown(body: Dispatcher.ResponseData['body'], source: NodeJS.ReadableStream & { destroy(error?: Error): void }, end: NodeJS.ReadableStream) {
  if (!body.readableEnded) body.destroy();
  if (source !== body && source !== end) source.destroy();
}

/**
 * The proxy routes' path parameters, checked by hand: an id that matches API_ID_PATTERN (nearly every
 * call) is taken as it is; anything else goes to the zod schema, whose error the caller gets (400).
 */
function paramsValidator(wildcard: boolean) {
  return ({ schema, httpPart }: { schema: unknown; httpPart?: string }) => {
    const zod = validatorCompiler({ schema } as Parameters<typeof validatorCompiler>[0]);
    if (httpPart !== 'params') return zod;
    return (data: unknown) => {
      const params = data as { apiId?: unknown; '*'?: unknown };
      if (typeof params.apiId === 'string' && API_ID_PATTERN.test(params.apiId) && (typeof params['*'] === 'string') === wildcard) return { value: params };
      return zod(data);
    };
  };
}

function carriesBody(raw: IncomingMessage): boolean {
  return raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length'] ?? 0) > 0;
}

function bodyTooLarge(limit: number) {
  return new PlatformError('payload_too_large', `The request body is larger than the proxy limit of ${limit} bytes`, {
    hint: 'Send a smaller body. A call refused for its size is not charged (or is refunded).',
    details: {},
  });
}

function retryAfter(given: string | string[] | undefined, fallback: number): string {
  const value = Array.isArray(given) ? given[0] : given;
  return value && /^\d{1,4}$/.test(value.trim()) ? value.trim() : String(fallback);
}

/** A call the deadline (PROXY_MAX_CALL_MS) ended before the upstream answered. */
function callTooLong(maxCallMs: number, retryAfterSeconds: number): PlatformError {
  return new PlatformError('upstream_unavailable', `The call did not complete within ${maxCallMs / 1000} s, the longest a proxied call may take`, {
    hint: 'The call was refunded. Retry after the number of seconds in Retry-After, or send a smaller request.',
    headers: { 'Retry-After': String(retryAfterSeconds) },
    details: {},
  });
}

/** Maps a failure before the upstream answered: too-large body (413), private address (403), else unavailable (503). */
function forwardFailure(error: unknown, retryAfterSeconds: number, limit: number): PlatformError {
  if (error instanceof BodyTooLarge || (error as { cause?: unknown })?.cause instanceof BodyTooLarge) return bodyTooLarge(limit);
  if (error instanceof PrivateUpstreamError || (error as { cause?: unknown })?.cause instanceof PrivateUpstreamError) {
    return new PlatformError('private_upstream', 'The upstream resolves to a private, loopback or link-local address; the proxy refuses it', {
      hint: 'The call was refunded. Register the API with a public base URL.',
      details: {},
    });
  }
  const timedOut =
    error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.ConnectTimeoutError || error instanceof undiciErrors.BodyTimeoutError;
  return new PlatformError('upstream_unavailable', timedOut ? 'The upstream did not answer in time' : 'The upstream could not be reached', {
    hint: 'The call was refunded. Retry after the number of seconds in Retry-After.',
    headers: { 'Retry-After': String(retryAfterSeconds) },
    details: {},
  });
}

/**
 * Refunds the charge of a failed call and says so on the error response. When Postgres refuses the
 * refund at that moment it is queued (refundOrQueue); the caller still gets the failure it is owed.
 */
async function refundInto(request: FastifyRequest, reply: FastifyReply, receipt: ChargeReceipt, failure: PlatformError): Promise<void> {
  if (!receipt.chargeId) return;
  const outcome = await request.server.charges.refund(receipt.chargeId, `refund: ${failure.code}`, request.server.refundQueue, request.log);
  // Every failure built in this module carries a details object; the refund is reported in it.
  if (!outcome.refunded) {
    if (failure.details) Object.assign(failure.details, { chargeId: receipt.chargeId, refund: 'pending' });
    return;
  }
  reply.header('X-Service-Cost', '0');
  reply.header('X-Service-Balance', formatDollars(outcome.balanceMicros));
  reply.header('X-Service-Refund-Id', outcome.refundId);
  if (failure.details) Object.assign(failure.details, { chargeId: receipt.chargeId, refundId: outcome.refundId });
}

/** The first bytes of an upstream error body as text; the rest is discarded. */
async function readExcerpt(body: NodeJS.ReadableStream & { destroy(error?: Error): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= UPSTREAM_ERROR_BODY_BYTES) break;
    }
  } catch {
    // A broken error body still makes a 502; what arrived is enough.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, UPSTREAM_ERROR_BODY_BYTES).toString('utf8');
}

export default proxyRoutes;
