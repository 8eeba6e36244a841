import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiId as API_ID } from '#contracts/directory';
import {
  CONNECT_REQUEST_STATUSES,
  cancelConnectRequest,
  declineConnectRequest,
  getConnectRequest,
  listConnectRequests,
  purposeSchema,
  requestConnection,
  scopesSchema,
  type ConnectRequestView,
} from '#core/connect-requests';
import type { Caller } from '#core/identity';
import { operation, restDoor } from '../http/operation.js';
import type { StreamCloseReason } from '../plugins/event-streams.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

/** The longest a long poll (or an MCP tool call) waits for a request's outcome. */
export const MAX_WAIT_SECONDS = 60;

export const connectRequestSchema = z.object({
  id: z.string(),
  apiId: z.string(),
  apiName: z.string(),
  authKind: z.enum(['key', 'oauth', 'none']).describe('How a person connects the API: their own key (or token), or an OAuth grant'),
  oauthProvider: z.string().nullable(),
  status: z
    .enum(CONNECT_REQUEST_STATUSES)
    .describe('pending until a person connects the API (connected) or declines; cancelled by the agent; expired'),
  purpose: z.string(),
  scopes: z.array(z.string()),
  createdAt: z.string(),
  expiresAt: z.string(),
  resolvedAt: z.string().nullable(),
  connectUrl: z.string().describe("The dashboard's inbox at this request, where a person connects or declines in one step"),
  next: z.string().describe('What the agent does next, in words'),
});

const waitSeconds = z.coerce
  .number()
  .int()
  .min(0)
  .max(MAX_WAIT_SECONDS)
  .optional()
  .describe(`Long poll: wait up to this many seconds (at most ${MAX_WAIT_SECONDS}) for a pending request to be answered before replying`);
const waitQuery = z.object({ waitSeconds, wait: waitSeconds.describe('Alias of waitSeconds') });
const requestParams = z.object({ requestId: z.string().min(1).max(100).describe('The connect request id') });
const requestAnswer = z.object({ ok: z.literal(true), request: connectRequestSchema });

const waitOf = (query: { waitSeconds?: number | undefined; wait?: number | undefined }) => query.waitSeconds ?? query.wait ?? 0;

/**
 * Waits up to `seconds` for a pending request to end, counted as one of the account's open event
 * streams (SSE_MAX_STREAMS_PER_ACCOUNT), and answers the request as it then stands.
 */
async function awaitOutcome(app: FastifyInstance, caller: Caller, view: ConnectRequestView, seconds: number): Promise<ConnectRequestView> {
  if (seconds <= 0 || view.status !== 'pending') return view;
  let wake: () => void = () => {};
  const admitted = await app.eventStreams.open(caller.accountId, caller.keyId, () => wake(), caller.memberId);
  try {
    await new Promise<void>((resolve) => {
      const untilExpiry = new Date(view.expiresAt).getTime() - Date.now() + 50;
      // Past its expiry the request is read again, which expires it.
      const timer = setTimeout(() => finish(), Math.max(0, Math.min(seconds * 1000, untilExpiry)));
      let stop: () => void = () => {};
      const finish = () => {
        clearTimeout(timer);
        stop();
        resolve();
      };
      wake = finish;
      stop = app.connectRequests.hub.follow(caller.accountId, view.id, { ended: finish, closed: finish });
    });
    return await getConnectRequest(app.connectRequests, caller, view.id);
  } finally {
    admitted.release();
  }
}

/** POST /connect/:apiId/request and the request_connection tool. */
export const requestConnectionOperation = operation(
  {
    params: z.object({ apiId: API_ID.describe('The directory id of the API to connect (from discover_apis, search_apis or get_api)') }),
    querystring: waitQuery,
    body: z.object({ purpose: purposeSchema, scopes: scopesSchema.optional() }),
  },
  async (app, door, { params, query, body }) => {
    const made = await requestConnection(app.connectRequests, door.caller, { apiId: params.apiId, purpose: body.purpose, scopes: body.scopes });
    const request = await awaitOutcome(app, door.caller, made.request, waitOf(query));
    return { ok: true as const, request, created: made.created };
  },
);

/** GET /connect/requests/:id and the get_connection_request tool. */
export const getConnectRequestOperation = operation({ params: requestParams, querystring: waitQuery }, async (app, door, { params, query }) => {
  const request = await getConnectRequest(app.connectRequests, door.caller, params.requestId);
  return { ok: true as const, request: await awaitOutcome(app, door.caller, request, waitOf(query)) };
});

/** GET /connect/requests and the list_connection_requests tool. */
export const listConnectRequestsOperation = operation(
  {
    querystring: z.object({
      status: z.enum(CONNECT_REQUEST_STATUSES).optional().describe('Only requests in this status'),
      limit: z.coerce.number().int().min(1).max(200).default(50).describe('Requests per answer (1 to 200, default 50)'),
      cursor: z.string().min(1).max(100).optional().describe('nextCursor of the previous page'),
    }),
  },
  async (app, door, { query }) => {
    const page = await listConnectRequests(app.connectRequests, door.caller, query);
    return { ok: true as const, requests: page.requests, nextCursor: page.nextCursor };
  },
);

const sseFrame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * Connect requests: an agent asks a person to connect an API (issue 30, §3). Agents create, poll,
 * wait for and cancel their requests; a person answers them in the dashboard: by connecting the API
 * (POST /connect/{api_id} with a key, or the OAuth flow) or by declining.
 */
const connectRequestRoutes: FastifyPluginAsyncZod = async (app) => {
  const { settings } = app.deps;

  app.post(
    '/connect/:apiId/request',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'Ask a person to connect an API (agents may): the request reaches the dashboard inbox, e-mail and webhooks',
        description:
          'Say in `purpose` what you want to do with the API and why: the person reads it before connecting. An identical pending request (same API, key, purpose and scopes) is answered with 200 instead of a new one. Then wait for the outcome: GET /connect/requests/{id}?wait=60, or the event stream GET /connect/requests/{id}/events; `?wait=N` here waits too.',
        params: requestConnectionOperation.schemas.params,
        querystring: requestConnectionOperation.schemas.querystring,
        body: requestConnectionOperation.schemas.body,
        response: {
          201: requestAnswer.extend({ created: z.literal(true) }),
          200: requestAnswer.extend({ created: z.boolean().describe('false: an identical pending request was answered instead') }),
          ...errorResponses(409),
        },
      },
    },
    async (request, reply) => {
      const answer = await requestConnectionOperation.run(app, restDoor(request, reply), request);
      return reply.code(answer.created ? 201 : 200).send(answer);
    },
  );

  app.get(
    '/connect/requests',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'Connect requests, pending first (an agent key sees the ones it made)',
        querystring: listConnectRequestsOperation.schemas.querystring,
        response: { 200: z.object({ ok: z.literal(true), requests: z.array(connectRequestSchema), nextCursor: z.string().nullable() }) },
      },
    },
    async (request, reply) => listConnectRequestsOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/connect/requests/:requestId',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'A connect request and how it stands; ?wait=N long-polls up to N seconds for a pending one',
        params: requestParams,
        querystring: waitQuery,
        response: { 200: requestAnswer },
      },
    },
    async (request, reply) => getConnectRequestOperation.run(app, restDoor(request, reply), request),
  );

  app.post(
    '/connect/requests/:requestId/decline',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'Decline a connect request (a person in the dashboard only)',
        params: requestParams,
        response: { 200: requestAnswer, ...errorResponses(409) },
      },
    },
    async (request) => ({
      ok: true as const,
      request: await declineConnectRequest(app.connectRequests, requireAuth(request), request.params.requestId),
    }),
  );

  app.delete(
    '/connect/requests/:requestId',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'Cancel a pending connect request (the agent no longer needs it)',
        params: requestParams,
        response: { 200: requestAnswer, ...errorResponses(409) },
      },
    },
    async (request) => ({
      ok: true as const,
      request: await cancelConnectRequest(app.connectRequests, requireAuth(request), request.params.requestId),
    }),
  );

  app.get(
    '/connect/requests/:requestId/events',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['connections'],
        summary: 'Server-sent events of a connect request: its state now, then its outcome, then the stream ends',
        description:
          'The first event is the request as it stands (`connect_request.pending`, or its outcome if it has one); a pending request is followed by one of `connect_request.connected`, `connect_request.declined`, `connect_request.cancelled` or `connect_request.expired`, after which the stream ends. Each `data:` is the request (as GET /connect/requests/{id} answers it). Comment lines are heartbeats. A stream ends after SSE_MAX_LIFETIME_SECONDS (reconnect: the first event says where it stands), and with a `stream.closed` event when the key that opened it stops working.',
        params: requestParams,
        response: { ...errorResponses(429) },
      },
    },
    async (request, reply) => {
      const caller = requireAuth(request);
      const current = await getConnectRequest(app.connectRequests, caller, request.params.requestId);
      let closeFor: (reason: StreamCloseReason) => void = () => {};
      const admitted = await app.eventStreams.open(caller.accountId, caller.keyId, (reason) => closeFor(reason), caller.memberId);

      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-request-id': request.id,
      });
      raw.write(`retry: 3000\n: connect request ${current.id}\n\n`);
      raw.write(sseFrame(`connect_request.${current.status}`, current));
      let finished = false;
      let stop: () => void = () => {};
      const lifetime = setTimeout(() => finish(), settings.SSE_MAX_LIFETIME_SECONDS * 1000);
      lifetime.unref();
      const heartbeat = setInterval(() => {
        if (!finished) raw.write(': heartbeat\n\n');
      }, settings.SSE_HEARTBEAT_MS);
      heartbeat.unref();
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(lifetime);
        clearInterval(heartbeat);
        admitted.release();
        stop();
        if (!raw.writableEnded) raw.end();
      };
      closeFor = (reason) => {
        if (finished) return;
        raw.write(sseFrame('stream.closed', { ok: false, ...reason }));
        finish();
      };
      request.raw.on('close', finish);
      raw.on('close', finish);
      if (current.status !== 'pending' || request.raw.destroyed || raw.destroyed) return finish();
      stop = app.connectRequests.hub.follow(caller.accountId, current.id, {
        ended: () => {
          getConnectRequest(app.connectRequests, caller, current.id)
            .then((ended) => {
              if (!finished) raw.write(sseFrame(`connect_request.${ended.status}`, ended));
            })
            .catch((error: unknown) => request.log.warn({ err: error }, 'connect request outcome not read for its event stream'))
            .finally(finish);
        },
        closed: finish,
      });
    },
  );
};

export default connectRequestRoutes;
