import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validatorCompiler, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses } from './error-responses.js';
import { formatDollars } from '#contracts/money';
import { chargeRequest } from '../http/charge.js';
import { proxyTarget, type AnswerSink } from '#core/gateway';
import { requireAuth } from '../plugins/auth.js';
import { apiId as API_ID, API_ID_PATTERN } from '#contracts/directory';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Every proxied answer's own headers, over the upstream's (names in lower case, as Fastify keeps them). */
const SANDBOX_HEADERS = [
  ['content-security-policy', "sandbox; default-src 'none'"],
  ['x-content-type-options', 'nosniff'],
  ['cross-origin-resource-policy', 'same-site'],
] as const;
/** An answer to a request with an Origin may be read cross-origin, headers included. */
const CORS_HEADERS = [
  ['access-control-allow-origin', '*'],
  ['access-control-expose-headers', '*'],
] as const;
/** `/api/v1/proxy/{api_id}`: segments of the raw URL before the path remainder. */
const SEGMENTS_BEFORE_REMAINDER = 4;
/**
 * The metered proxy. Registered as its own encapsulated plugin: every content type is passed
 * through as the raw request stream (never parsed or buffered), with its own size limit.
 */
const proxyRoutes: FastifyPluginAsyncZod = async (app) => {
  // Proxied answers are third-party content on the dashboard's origin: the browser must treat every
  // one of them (errors too) as an opaque, script-less document that other sites cannot embed.
  // (Set last, over any the upstream sent; with `done`, so no promise per call. A streamed answer
  // written directly, see replySink, sets the same headers itself.)
  app.addHook('onSend', (_request, reply, payload, done) => {
    for (const [name, value] of SANDBOX_HEADERS) reply.header(name, value);
    done(null, payload);
  });

  // Browser agents may call the proxy: with an API key or agent key only (a cookie alone is refused,
  // see auth 'apiKey'), so a cross-origin page can use no one's credentials but its own. Preflights
  // are answered here (not forwarded, not charged, not rate limited per key); every answer to a
  // request with an Origin may be read cross-origin, headers included. (docs/decisions/proxy-cors.md)
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.headers.origin !== undefined) for (const [name, value] of CORS_HEADERS) reply.header(name, value);
    done(null, payload);
  });
  for (const url of ['/proxy/:apiId/*', '/proxy/:apiId']) {
    app.route({
      method: 'OPTIONS',
      url,
      config: { auth: 'none' },
      schema: { hide: true },
      handler: async (request, reply) => {
        const asked = request.headers['access-control-request-headers'];
        reply.header('Access-Control-Allow-Origin', '*');
        reply.header('Access-Control-Allow-Methods', METHODS.join(', '));
        // Upstreams take headers of their own: any well-formed header name may be sent.
        reply.header(
          'Access-Control-Allow-Headers',
          typeof asked === 'string' && /^[A-Za-z0-9!#$%&'*+.^_`|~, -]{1,2000}$/.test(asked) ? asked : 'authorization, content-type, x-max-cost',
        );
        reply.header('Access-Control-Max-Age', '600');
        return reply.code(204).send();
      },
    });
  }

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
    handler: async (request, reply) => proxyCall(request, reply, request.params.apiId),
  });
  // The API's base URL itself (`/proxy/{api_id}` or `/proxy/{api_id}/`, the router ignores the trailing slash).
  app.route({
    method: [...METHODS],
    url: '/proxy/:apiId',
    config: { auth: 'apiKey', priced: true, sampledRequestLog: true },
    schema: { ...schema, params: z.object({ apiId: API_ID }) },
    validatorCompiler: paramsValidator(false),
    handler: async (request, reply) => proxyCall(request, reply, request.params.apiId),
  });
};

/** The REST door of the metered call: the request's parts in, the reply as the answer's sink. */
async function proxyCall(request: FastifyRequest, reply: FastifyReply, apiId: string): Promise<FastifyReply> {
  const auth = requireAuth(request);
  const raw = request.raw;
  // Fastify hands the body of POST/PUT/PATCH/DELETE to the catch-all parser; a GET body stays on the raw request.
  const body = (request.body as IncomingMessage | undefined) ?? (carriesBody(raw) ? raw : null);
  await request.server.meteredCall.run({
    caller: auth,
    apiId,
    method: request.method,
    target: proxyTarget(raw.url ?? '/', SEGMENTS_BEFORE_REMAINDER),
    headers: raw.rawHeaders,
    body,
    declaredLength: Number(request.headers['content-length'] ?? 0),
    charge: async (call) => {
      const receipt = await chargeRequest(request, reply, call);
      reply.header('X-Service-Api', apiId);
      if (receipt.balanceMicros === null) reply.header('X-Service-Balance', formatDollars(await request.server.charges.balanceOf(auth.accountId)));
      return receipt;
    },
    // A call paid with x402 costs only once its payment settled (plugins/x402.ts, before the answer left).
    paid: (receipt, costMicros) => ({
      costMicros: request.x402Payment && !request.x402Payment.settled ? 0n : costMicros,
      chargeId: receipt.chargeId ?? request.x402Payment?.chargeId ?? null,
      paidWith: request.x402Payment ? 'x402' : 'balance',
    }),
    sink: replySink(reply),
    doorBase: `/api/v1/proxy/${apiId}`,
    requestId: request.id,
  });
  return reply;
}

/**
 * The HTTP reply as the metered call's answer sink. A streamed answer is written directly on the
 * response: chunk by chunk from the upstream's body when nothing stands between them (deliverChunks),
 * else piped from the stream it comes as (deliverDirect). One without a body, a HEAD request's, an
 * x402-paid call's (whose payment settles in an onSend hook before the answer may leave) and one whose
 * headers Node refuses go through Fastify's reply, which pipes the body, destroys the reply when the
 * body fails and the body when the caller hangs up. In each, the close listener, added first, tells
 * the call first.
 */
function replySink(reply: FastifyReply): AnswerSink {
  return {
    get closed() {
      return reply.raw.closed;
    },
    deliverChunks(status, headers, body) {
      if (!writesDirectly(reply) || !writeHead(reply, status, headers)) return null;
      const raw = reply.raw;
      return new Promise<boolean>((resolve) => {
        raw.once('close', () => {
          const finished = raw.writableFinished;
          if (!finished) {
            // The caller went away, or the upstream broke off (below): the body stops, and knows which.
            body.destroy();
            reply.log.info({ res: reply }, 'stream closed prematurely');
          }
          setImmediate(() => resolve(finished));
        });
        body.sendTo({
          write(chunk) {
            if (raw.write(chunk)) return true;
            raw.once('drain', () => body.resume());
            return false;
          },
          end() {
            raw.end();
          },
          fail(error) {
            reply.log.warn({ err: error }, 'response terminated with an error with headers already sent');
            raw.destroy();
          },
        });
      });
    },
    deliver(status, headers, body, stopping) {
      if (body !== null && writesDirectly(reply)) {
        const direct = deliverDirect(reply, status, headers, body, stopping);
        if (direct) return direct;
      }
      reply.code(status);
      reply.headers(headers);
      return new Promise<boolean>((resolve) => {
        reply.raw.once('close', () => {
          const finished = reply.raw.writableFinished;
          if (!finished) stopping();
          // Resolved after Fastify's own close handling has torn the body down.
          setImmediate(() => resolve(finished));
        });
        if (body) reply.send(body);
        else reply.send();
      });
    },
    abort() {
      if (!reply.raw.writableFinished) reply.raw.destroy();
    },
  };
}

/** An answer with a body may be written on the raw response, except a HEAD request's and an x402-paid call's. */
function writesDirectly(reply: FastifyReply): boolean {
  return reply.request.method !== 'HEAD' && !reply.request.x402Payment;
}

/**
 * Writes the answer's one header block on the raw response and hijacks the reply, so Fastify sends
 * nothing itself; its onResponse hooks (the log line, metrics, tracing) still run when the answer has
 * gone. Headers in the order Fastify's path sets them: the platform's so far (request id, rate
 * limits, X-Service-*), the upstream's over them, the proxy's own over both. False when Node refuses
 * a header (checked before anything is sent): Fastify's path then answers as it always did.
 */
function writeHead(reply: FastifyReply, status: number, headers: Record<string, string | string[]>): boolean {
  const out = reply.getHeaders();
  for (const name in headers) out[name.toLowerCase()] = headers[name];
  for (const [name, value] of SANDBOX_HEADERS) out[name] = value;
  if (reply.request.headers.origin !== undefined) for (const [name, value] of CORS_HEADERS) out[name] = value;
  try {
    reply.raw.writeHead(status, out as OutgoingHttpHeaders);
  } catch {
    return false;
  }
  reply.hijack();
  return true;
}

/**
 * A streamed answer (decoded or redacted on its way) piped to the raw response after one header
 * block (writeHead), without Fastify's stream reply (a setHeader per header, two end-of-stream
 * watchers) and its onSend chain, whose work for a proxied answer is the headers set there.
 */
function deliverDirect(
  reply: FastifyReply,
  status: number,
  headers: Record<string, string | string[]>,
  body: Readable,
  stopping: () => void,
): Promise<boolean> | null {
  if (!writeHead(reply, status, headers)) return null;
  const raw = reply.raw;
  return new Promise<boolean>((resolve) => {
    raw.once('close', () => {
      const finished = raw.writableFinished;
      if (!finished) {
        // The caller went away, or the body failed (below): the call is told before the body is torn down.
        stopping();
        body.destroy();
        reply.log.info({ res: reply }, 'stream closed prematurely');
      }
      setImmediate(() => resolve(finished));
    });
    let failed = false;
    body.on('error', (error) => {
      if (failed) return;
      failed = true;
      reply.log.warn({ err: error }, 'response terminated with an error with headers already sent');
      raw.destroy();
    });
    body.pipe(raw);
  });
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
      if (typeof params.apiId === 'string' && API_ID_PATTERN.test(params.apiId) && (typeof params['*'] === 'string') === wildcard)
        return { value: params };
      return zod(data);
    };
  };
}

function carriesBody(raw: IncomingMessage): boolean {
  return raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length'] ?? 0) > 0;
}

export default proxyRoutes;
