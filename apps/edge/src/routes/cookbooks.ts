import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { PRICES } from '#contracts/money';
import type { Actor } from '#workflows/messages';
import {
  agentKeyScope,
  assertApproverMayComplete,
  assignStep,
  cancelSession,
  completeStep,
  CookbookCache,
  listCookbookPage,
  listSessionPage,
  priorCompletion,
  humanStepView,
  isEnded,
  listPendingHumanSteps,
  listSessionSteps,
  requireCookbook,
  requireSession,
  requireSessionAndCookbook,
  sessionView,
  slotViews,
  startSession,
  stepView,
  checkDecision,
  type Cookbook,
} from '#core/cookbooks';
import { readSessionEvents, STREAM_ID, type StreamedEvent } from '#core/cookbooks';
import { loadCallerAccess } from '#core/directory';
import { requireAuth } from '../plugins/auth.js';
import type { Caller } from '#core/identity';
import type { StreamCloseReason } from '../plugins/event-streams.js';
import { IDEMPOTENCY_KEY } from '../http/idempotency-key.js';
import { operation, restDoor, type OperationInput } from '../http/operation.js';
import { errorResponses } from './error-responses.js';
import { apiId } from '#contracts/directory';
import { cookbookSchema, cookbookSummarySchema, humanStepSchema, jsonObject, sessionSchema, stepSchema } from '#contracts/cookbooks';

const cookbookParams = z.object({ id: z.string().min(1).max(100).describe('The cookbook id, e.g. weather-alert-sms (list_cookbooks lists them)') });
const sessionParams = z.object({
  sessionId: z.string().min(1).max(100).describe('The session id start_cookbook answered (list_sessions lists the active ones)'),
});

const summary = (cookbook: Cookbook) => ({
  id: cookbook.id,
  title: cookbook.title,
  description: cookbook.description,
  category: cookbook.category,
  slots: cookbook.slots.map(({ name, category, required }) => ({ name, category, required })),
  stepCount: cookbook.steps.length,
  humanSteps: cookbook.steps.filter((step) => step.kind === 'human').length,
});

/** The dashboard's cookie session is a person; any API or agent key is not. */
const actorOf = (caller: Caller): Actor => (caller.via === 'cookie' ? 'human' : 'key');

/** Who the step's history names as its completer: the key, the approver or the owner signed in. */
const completerOf = (auth: Caller) =>
  auth.keyId !== null ? { keyId: auth.keyId } : auth.memberId !== null ? { memberId: auth.memberId } : { personId: auth.accountId };

// The cookbook of a session comes with its row (see CookbookCache): one round trip for both. One
// cache per database, shared by the routes and their MCP tools.
const cookbookCaches = new WeakMap<FastifyInstance['deps']['sql'], CookbookCache>();
function cookbookCache(app: FastifyInstance): CookbookCache {
  let cache = cookbookCaches.get(app.deps.sql);
  if (!cache) {
    cache = new CookbookCache(app.deps.sql);
    cookbookCaches.set(app.deps.sql, cache);
  }
  return cache;
}

/** The caller's session and its cookbook: for an agent key, a session it started (docs/decisions/agent-keys-see-their-own-sessions.md). */
const sessionAndCookbook = (app: FastifyInstance, caller: Caller, sessionId: string) =>
  requireSessionAndCookbook(app.deps.sql, cookbookCache(app), caller.accountId, sessionId, agentKeyScope(caller));

/** The caller's session: for an agent key, one it started. */
const callersSession = (app: FastifyInstance, caller: Caller, sessionId: string) =>
  requireSession(app.deps.sql, caller.accountId, sessionId, agentKeyScope(caller));

const sessionEnded = (row: { id: string; status: string }) =>
  new PlatformError('conflict', `The session has ended (${row.status})`, { hint: `GET /api/v1/cookbooks/sessions/${row.id} for the outcome.` });

/** GET /cookbooks and the list_cookbooks tool. */
export const listCookbooksOperation = operation(
  {
    querystring: z.object({
      q: z.string().max(200).optional().describe('Words to look for in cookbook names and descriptions'),
      category: z.string().max(100).optional().describe('Only the cookbooks of this category'),
      limit: z.coerce.number().int().min(1).max(200).default(50).describe('Cookbooks per page (1 to 200, default 50)'),
      cursor: z.string().max(100).optional().describe("The previous page's nextCursor, to read the next page"),
    }),
  },
  async (app, _door, { query }) => {
    const page = await listCookbookPage(app.deps.sql, query);
    return { ok: true as const, cookbooks: page.cookbooks.map(summary), nextCursor: page.nextCursor };
  },
);

/** GET /cookbooks/sessions and the list_sessions tool. */
export const listSessionsOperation = operation(
  {
    querystring: z.object({
      status: z
        .enum(['active', 'ended', 'all'])
        .default('active')
        .describe(
          'active (the default, as the specification lists): running or waiting for a human; ended: completed, failed, cancelled or expired; all',
        ),
      limit: z.coerce.number().int().min(1).max(200).default(50).describe('Sessions per page (1 to 200, default 50)'),
      cursor: z.string().min(1).max(100).optional().describe("The previous page's nextCursor, to read the next page"),
    }),
  },
  async (app, door, { query }) => {
    const { caller } = door;
    const page = await listSessionPage(app.deps.sql, caller.accountId, { ...query, agentKeyId: agentKeyScope(caller) });
    return { ok: true as const, sessions: page.sessions.map(sessionView), nextCursor: page.nextCursor };
  },
);

/** GET /cookbooks/:id and the get_cookbook tool ($0.005; an unknown cookbook costs nothing). */
export const getCookbookOperation = operation({ params: cookbookParams }, async (app, door, { params }) => {
  const cookbook = await requireCookbook(app.deps.sql, params.id);
  await door.charge({ costMicros: PRICES.cookbookDetails, item: 'cookbook', description: `cookbook ${cookbook.id}` });
  // Each slot's suggestions with their state for this caller, callable ones first.
  const states = await app.callability.statesOf(
    cookbook.slots.flatMap((slot) => slot.suggestedProviders),
    await loadCallerAccess(app.deps.sql, door.caller),
  );
  return { ok: true as const, cookbook: { ...cookbook, slots: slotViews(cookbook, states) } };
});

const startSchemas = {
  params: cookbookParams,
  headers: z.object({ 'idempotency-key': z.string().regex(IDEMPOTENCY_KEY, 'must be 1-200 visible ASCII characters').optional() }).passthrough(),
  body: z.object({
    selectedApis: z
      .record(z.string().max(64), apiId)
      .describe(
        'Each slot\'s name (get_cookbook lists the slots) mapped to the directory API id chosen for it, e.g. {"weather": "openweathermap.org"}',
      ),
  }),
};

/** Starts a session; `created` is false when the Idempotency-Key answered an earlier start. */
async function startCookbook(app: FastifyInstance, caller: Caller, input: OperationInput<typeof startSchemas>) {
  const { sql, temporal, settings } = app.deps;
  const cookbook = await requireCookbook(sql, input.params.id);
  const idempotencyKey = input.headers['idempotency-key'];
  // A choice the caller cannot call now is refused with what would make it callable.
  const callability = await app.callability.statesOf(Object.values(input.body.selectedApis), await loadCallerAccess(sql, caller));
  const { row, created } = await startSession(sql, temporal, settings.TEMPORAL_START_TIMEOUT_MS, {
    callability,
    accountId: caller.accountId,
    cookbook,
    selectedApis: input.body.selectedApis,
    idempotencyKey: typeof idempotencyKey === 'string' ? idempotencyKey : null,
    startedBy: { keyId: caller.keyId, keyKind: caller.keyKind },
    maxActive: settings.SESSIONS_MAX_ACTIVE_PER_ACCOUNT,
  });
  return { created, body: { ok: true as const, session: sessionView(row) } };
}

/** The start_cookbook tool: POST /cookbooks/:id/start's body (a replay answers the same session). */
export const startCookbookOperation = operation(startSchemas, async (app, door, input) => (await startCookbook(app, door.caller, input)).body);

/** GET /cookbooks/sessions/:sessionId and the get_session tool. */
export const getSessionOperation = operation({ params: sessionParams }, async (app, door, { params }) => {
  const { row, cookbook } = await sessionAndCookbook(app, door.caller, params.sessionId);
  const history = await listSessionSteps(app.deps.sql, row.id);
  const byId = new Map(history.map((step) => [step.step_id, step]));
  const steps = cookbook.steps.map((step) => stepView(cookbook, row, step.stepId, byId.get(step.stepId))!);
  return { ok: true as const, session: { ...sessionView(row), cookbookTitle: cookbook.title, steps } };
});

/** GET /cookbooks/sessions/:sessionId/step and the get_current_step tool. */
export const getCurrentStepOperation = operation({ params: sessionParams }, async (app, door, { params }) => {
  const { row, cookbook } = await sessionAndCookbook(app, door.caller, params.sessionId);
  if (isEnded(row) || row.current_step_id === null) throw sessionEnded(row);
  const history = await listSessionSteps(app.deps.sql, row.id);
  const step = stepView(
    cookbook,
    row,
    row.current_step_id,
    history.find((h) => h.step_id === row.current_step_id),
  );
  if (!step) throw new Error(`step ${row.current_step_id} is not in cookbook ${cookbook.id}`);
  return { ok: true as const, step };
});

/** POST /cookbooks/sessions/:sessionId/complete-step and the complete_step tool. */
export const completeStepOperation = operation(
  {
    params: sessionParams,
    body: z.object({
      stepId: z.string().min(1).max(100).describe('The current step id (get_current_step answers it)'),
      resultData: jsonObject.describe("The step's result: an object matching the step's inputSchema"),
      decision: z
        .enum(['approve', 'reject', 'request_changes'])
        .optional()
        .describe('Human steps only; approve (the default) validates resultData against the inputSchema'),
      note: z.string().min(1).max(2000).optional().describe("The person's note; required with request_changes"),
    }),
  },
  async (app, door, { params, body }) => {
    const { sql, temporal, settings } = app.deps;
    const auth = door.caller;
    const { row, cookbook } = await sessionAndCookbook(app, auth, params.sessionId);
    const { stepId, resultData, decision = 'approve', note } = body;
    const actor = actorOf(auth);
    const step = cookbook.steps.find((candidate) => candidate.stepId === stepId);
    if (auth.role === 'approver' && step) await assertApproverMayComplete(sql, row.id, step, auth.memberId);
    if (isEnded(row) || !step || stepId !== row.current_step_id) {
      // A retry of a completion that already happened (its answer lost to a timeout or a 503)
      // gets that completion's answer, not a 409.
      const history = await listSessionSteps(sql, row.id);
      const prior = priorCompletion(cookbook, history, { stepId, resultData, actor });
      if (prior) {
        const nextStep =
          prior.nextStepId === null
            ? null
            : stepView(
                cookbook,
                row,
                prior.nextStepId,
                history.find((h) => h.step_id === prior.nextStepId),
              );
        return { ok: true as const, session: sessionView(row), nextStep };
      }
    }
    if (isEnded(row)) throw sessionEnded(row);
    if (!step || stepId !== row.current_step_id) {
      throw new PlatformError('conflict', `Step "${stepId}" is not the current step ("${row.current_step_id}")`, {
        hint: `GET /api/v1/cookbooks/sessions/${row.id}/step for the current step.`,
      });
    }
    checkDecision(cookbook.id, step, { decision, note, resultData });
    const completion = {
      stepId,
      resultData,
      actor,
      completer: completerOf(auth),
      ...(decision === 'approve' ? {} : { decision, ...(note ? { note } : {}) }),
    };
    // The Update answers the session and the next step: nothing is read back from Postgres.
    return { ok: true as const, ...(await completeStep(temporal, settings.TEMPORAL_UPDATE_TIMEOUT_MS, row, cookbook, completion)) };
  },
);

/** GET /cookbooks/sessions/:sessionId/event-log and the get_session_events tool. */
export const getSessionEventsOperation = operation(
  {
    params: sessionParams,
    querystring: z.object({
      afterEventId: z
        .string()
        .regex(STREAM_ID, 'must be an event id from this session, such as "3-0"')
        .default('0-0')
        .describe('Omit (or "0-0") to read from the start'),
      limit: z.coerce.number().int().min(1).max(500).default(100).describe('Events per answer (1 to 500, default 100)'),
    }),
  },
  async (app, door, { params, query }) => {
    const row = await callersSession(app, door.caller, params.sessionId);
    const page = await readSessionEvents(app.deps.redis, app.deps.settings.REDIS_PREFIX, row.id, query.afterEventId, query.limit, isEnded(row));
    return {
      ok: true as const,
      sessionId: row.id,
      events: page.events.map((event) => ({ id: event.id, event: event.name, data: JSON.parse(event.data) as unknown })),
      lastEventId: page.lastEventId,
      ended: page.ended,
    };
  },
);

function sseFrame(event: StreamedEvent): string {
  return `id: ${event.id}\nevent: ${event.name}\ndata: ${event.data}\n\n`;
}

/**
 * Cookbooks and their sessions. Each session is a Temporal workflow; the reads here come from the
 * Postgres mirror its activities keep, the writes go to the workflow as Updates.
 */
const cookbookRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, temporal, settings } = app.deps;

  app.get(
    '/cookbooks',
    {
      schema: {
        tags: ['cookbooks'],
        summary: 'List cookbooks (free text and category filters)',
        querystring: listCookbooksOperation.schemas.querystring,
        response: {
          200: z.object({ ok: z.literal(true), cookbooks: z.array(cookbookSummarySchema), nextCursor: z.string().nullable() }),
          ...errorResponses(400),
        },
      },
    },
    async (request, reply) => listCookbooksOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/cookbooks/sessions',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: "The caller's sessions, newest first: active ones (running or waiting for a human) unless status says otherwise",
        querystring: listSessionsOperation.schemas.querystring,
        response: {
          200: z.object({ ok: z.literal(true), sessions: z.array(sessionSchema), nextCursor: z.string().nullable() }),
          ...errorResponses(400, 401),
        },
      },
    },
    async (request, reply) => listSessionsOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/cookbooks/:id',
    {
      // Priced: no implicit HEAD route, which would charge for a response without a body.
      exposeHeadRoute: false,
      config: { auth: 'key', priced: true },
      schema: {
        tags: ['cookbooks'],
        summary: 'Cookbook details with steps and API slots ($0.005)',
        params: getCookbookOperation.schemas.params,
        response: { 200: z.object({ ok: z.literal(true), cookbook: cookbookSchema }), ...errorResponses(402, 404) },
      },
    },
    async (request, reply) => getCookbookOperation.run(app, restDoor(request, reply), request),
  );

  app.post(
    '/cookbooks/:id/start',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['cookbooks'],
        summary: 'Start a session: selectedApis maps each slot name to a directory API id',
        description:
          'Send an Idempotency-Key header to make retries answer the same session (with Idempotent-Replayed: true); the same key with another cookbook or other selectedApis is 409 idempotency_conflict. ' +
          'An account has at most SESSIONS_MAX_ACTIVE_PER_ACCOUNT (100) sessions active at once: the next start is 409 conflict until one is finished or cancelled. ' +
          "A session started with an agent key is seen (listed, read, completed, cancelled) by that agent key, the account's API keys and its dashboard only. " +
          'Every chosen API must be callable by the caller now (callability.state "ready"); another choice is 409 api_not_callable with what would make it callable in the hint.',
        params: startSchemas.params,
        headers: startSchemas.headers,
        body: startSchemas.body,
        response: { 201: z.object({ ok: z.literal(true), session: sessionSchema }), ...errorResponses(400, 404, 409, 503) },
      },
    },
    async (request, reply) => {
      const { created, body } = await startCookbook(app, requireAuth(request), request);
      if (!created) reply.header('Idempotent-Replayed', 'true');
      return reply.code(201).send(body);
    },
  );

  app.get(
    '/cookbooks/sessions/:sessionId',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: 'A session with its progress and step history',
        params: getSessionOperation.schemas.params,
        response: {
          200: z.object({ ok: z.literal(true), session: sessionSchema.extend({ cookbookTitle: z.string(), steps: z.array(stepSchema) }) }),
          ...errorResponses(404),
        },
      },
    },
    async (request, reply) => getSessionOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/cookbooks/sessions/:sessionId/step',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['cookbooks'],
        summary: 'The current step, with instructions naming the chosen APIs; 409 when the session has ended',
        params: getCurrentStepOperation.schemas.params,
        response: { 200: z.object({ ok: z.literal(true), step: stepSchema }), ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => getCurrentStepOperation.run(app, restDoor(request, reply), request),
  );

  app.post(
    '/cookbooks/sessions/:sessionId/complete-step',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: 'Complete the current step with resultData matching its inputSchema',
        description:
          '409 when stepId is not the current step or the session has ended; 400 when resultData breaks the inputSchema; 403 when an API key completes a human step (a person completes those in the dashboard). ' +
          'A human step may offer decisions besides approving: decision "reject" ends the session (completed, outcome rejected), "request_changes" with a note sends it back to the step the cookbook names.',
        params: completeStepOperation.schemas.params,
        body: completeStepOperation.schemas.body,
        response: {
          200: z.object({ ok: z.literal(true), session: sessionSchema, nextStep: stepSchema.nullable() }),
          ...errorResponses(400, 403, 404, 409, 503),
        },
      },
    },
    async (request, reply) => completeStepOperation.run(app, restDoor(request, reply), request),
  );

  app.post(
    '/cookbooks/sessions/:sessionId/cancel',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['cookbooks'],
        summary: 'Cancel a session that has not ended (an addition to the specification)',
        params: sessionParams,
        // The body is optional: a reason, kept with the session's last event.
        body: z.object({ reason: z.string().max(500).optional() }).nullish(),
        response: { 200: z.object({ ok: z.literal(true), session: sessionSchema }), ...errorResponses(404, 409, 503) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const row = await callersSession(app, auth, request.params.sessionId);
      if (isEnded(row)) {
        throw new PlatformError('conflict', `The session has ended (${row.status})`, {
          hint: 'Only running sessions and sessions waiting for a human can be cancelled.',
        });
      }
      const reason = request.body?.reason;
      await cancelSession(temporal, settings.TEMPORAL_UPDATE_TIMEOUT_MS, row, reason);
      return { ok: true as const, session: sessionView(await requireSession(sql, auth.accountId, row.id)) };
    },
  );

  app.put(
    '/cookbooks/sessions/:sessionId/steps/:stepId/assignee',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['cookbooks'],
        summary: 'Assign a waiting human step to one approver, or (memberId null) to the first person who takes it',
        description:
          'Only the step a session is waiting on can be assigned (409 otherwise). An assigned step is shown to that approver only (and to the owner), and other approvers get 403 step_assigned_elsewhere if they try to complete it. Approvers are invited with POST /api/v1/members.',
        params: sessionParams.extend({ stepId: z.string().min(1).max(100) }),
        body: z
          .object({ memberId: z.string().min(1).max(100).nullable().describe('An approver of this account (GET /api/v1/members), or null') })
          .strict(),
        response: {
          200: z.object({
            ok: z.literal(true),
            sessionId: z.string(),
            stepId: z.string(),
            assignee: z.object({ id: z.string(), email: z.string() }).nullable(),
          }),
          ...errorResponses(400, 403, 404, 409),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { row, cookbook } = await sessionAndCookbook(app, auth, request.params.sessionId);
      const { stepId } = request.params;
      const step = cookbook.steps.find((candidate) => candidate.stepId === stepId);
      if (!step || step.kind !== 'human' || row.status !== 'waiting_for_human' || row.current_step_id !== stepId) {
        throw new PlatformError('conflict', `Step "${stepId}" is not a human step this session is waiting on`, {
          hint: `GET /api/v1/cookbooks/sessions/${row.id}/human-steps for the steps that can be assigned.`,
        });
      }
      const assignee = await assignStep(sql, auth.accountId, row.id, stepId, request.body.memberId);
      return { ok: true as const, sessionId: row.id, stepId, assignee };
    },
  );

  app.get(
    '/cookbooks/sessions/:sessionId/human-steps',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: "The session's human steps waiting for a person",
        params: sessionParams,
        response: { 200: z.object({ ok: z.literal(true), humanSteps: z.array(humanStepSchema) }), ...errorResponses(404) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const row = await callersSession(app, auth, request.params.sessionId);
      const rows = await listPendingHumanSteps(sql, auth.accountId, row.id, auth.memberId, agentKeyScope(auth));
      return { ok: true as const, humanSteps: rows.map(humanStepView) };
    },
  );

  app.get(
    '/me/human-steps',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: "Human steps waiting for a person across the account's sessions (the dashboard's inbox)",
        response: { 200: z.object({ ok: z.literal(true), humanSteps: z.array(humanStepSchema) }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const rows = await listPendingHumanSteps(sql, auth.accountId, null, auth.memberId, agentKeyScope(auth));
      return { ok: true as const, humanSteps: rows.map(humanStepView) };
    },
  );

  app.get(
    '/cookbooks/sessions/:sessionId/event-log',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: 'The session events after a given id, as JSON pages: for clients that poll instead of holding an event stream',
        description:
          "The same events, ids and names as the server-sent event stream. Pass the answer's lastEventId as afterEventId to get what came since; `ended: true` means the final event has been delivered.",
        params: getSessionEventsOperation.schemas.params,
        querystring: getSessionEventsOperation.schemas.querystring,
        response: {
          200: z.object({
            ok: z.literal(true),
            sessionId: z.string(),
            events: z.array(z.object({ id: z.string(), event: z.string(), data: z.unknown() })),
            lastEventId: z.string(),
            ended: z.boolean(),
          }),
          ...errorResponses(400, 404),
        },
      },
    },
    async (request, reply) => getSessionEventsOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/cookbooks/sessions/:sessionId/events',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['cookbooks'],
        summary: 'Server-sent events of the session: replays after Last-Event-ID, then follows live until the session ends',
        description:
          'Each event has `id:` (resume with Last-Event-ID), `event:` (session.started, step.started, step.completed, human_step.pending, human_step.reminder, human_step.completed, human_step.rejected, human_step.changes_requested, session.completed, session.failed, session.expired, session.cancelled) and JSON `data:`. Comment lines are heartbeats. A stream ends after SSE_MAX_LIFETIME_SECONDS (reconnect with Last-Event-ID), and with a last `stream.closed` event when the key that opened it is disabled or revoked.',
        params: sessionParams,
        querystring: z.object({ lastEventId: z.string().optional() }),
        response: { ...errorResponses(400, 404, 429) },
      },
    },
    async (request, reply) => {
      const row = await callersSession(app, requireAuth(request), request.params.sessionId);
      const header = request.headers['last-event-id'];
      const lastEventId = (typeof header === 'string' ? header.trim() : undefined) || request.query.lastEventId || '0-0';
      if (!STREAM_ID.test(lastEventId)) {
        throw new PlatformError('validation_failed', 'Last-Event-ID must be an event id from this stream, such as "3-0"', {
          hint: 'Omit it to replay from the start.',
        });
      }

      const caller = requireAuth(request);
      // Counted across every edge (SSE_MAX_STREAMS_PER_ACCOUNT), and closed if its key stops working.
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
      raw.write(`retry: 3000\n: session ${row.id}\n\n`);
      let unsubscribe: (() => void) | null = null;
      let finished = false;
      // A stream does not live forever: the client reconnects with Last-Event-ID and misses nothing.
      const lifetime = setTimeout(() => finish(), settings.SSE_MAX_LIFETIME_SECONDS * 1000);
      lifetime.unref();
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(lifetime);
        admitted.release();
        unsubscribe?.();
        if (!raw.writableEnded) raw.end();
      };
      // The key was disabled or revoked: say so in a last event, then end. A reconnecting client
      // gets the key's 403.
      closeFor = (reason) => {
        if (finished) return;
        raw.write(`event: stream.closed\ndata: ${JSON.stringify({ ok: false, ...reason })}\n\n`);
        finish();
      };
      request.raw.on('close', finish);
      raw.on('close', finish);
      // The client may have gone while the stream was being admitted.
      if (request.raw.destroyed || raw.destroyed) finish();
      try {
        const stop = await app.sessionEvents.follow(
          row.id,
          lastEventId,
          {
            event: (event) => {
              if (!finished) raw.write(sseFrame(event));
            },
            heartbeat: () => {
              if (!finished) raw.write(': heartbeat\n\n');
            },
            end: finish,
          },
          { sessionEnded: isEnded(row) },
        );
        if (finished) stop();
        else unsubscribe = stop;
      } catch (error) {
        request.log.warn({ err: error }, 'session event stream failed');
        finish();
      }
    },
  );
};

export default cookbookRoutes;
