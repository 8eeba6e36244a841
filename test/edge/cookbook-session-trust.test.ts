import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getCookbook, loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

interface Session {
  sessionId: string;
  status: string;
  currentStep: string | null;
}
interface Step {
  stepId: string;
  title: string;
  status: string;
  instructions: string | null;
  inputSchema: Record<string, unknown> | null;
}

const FORECAST = { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning', severity: 'severe' }] };
const DRAFT = { message: 'Storm tonight from 20:00. Stay indoors.', recipients: ['+4712345678'] };
const SESSION_CAP = 3;
const TEST_DELIVERY_CAP = 3;

/**
 * Trust findings about cookbook sessions and free resources: text the database cannot store is
 * refused at the edge (a session is never wedged by it), a free session does not hand out the paid
 * cookbook details, free resources are capped, and agent keys see only the sessions they started.
 */
describe('cookbook sessions: trust', () => {
  const taskQueue = uniqueId('session-trust-');
  const redisPrefix = uniqueId('cst');
  let app: FastifyInstance;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let weatherApi: string;
  let smsApi: string;

  beforeAll(async () => {
    app = await createTestApp({
      TEMPORAL_TASK_QUEUE: taskQueue,
      REDIS_PREFIX: redisPrefix,
      // Short, so a completion the workflow cannot apply shows as a 503 within the test (on code without the check).
      TEMPORAL_UPDATE_TIMEOUT_MS: '5000',
      SESSIONS_MAX_ACTIVE_PER_ACCOUNT: String(SESSION_CAP),
      WEBHOOK_TEST_DELIVERIES_PER_HOUR: String(TEST_DELIVERY_CAP),
      ALLOW_PRIVATE_UPSTREAMS: 'true',
    });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    weatherApi = await createTestApi(app.deps.sql, 'weather');
    smsApi = await createTestApi(app.deps.sql, 'sms');
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
  });

  const auth = (fullKey: string) => bearer(fullKey);
  const start = (fullKey: string, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/api/v1/cookbooks/weather-alert-sms/start',
      headers: { ...auth(fullKey), ...headers },
      payload: { selectedApis: { weather: weatherApi, sms: smsApi } },
    });
  const startWeather = async (fullKey: string) => expectOk<{ session: Session }>(await start(fullKey), 201).session;
  const complete = (fullKey: string, sessionId: string, stepId: string, resultData: unknown) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`,
      headers: auth(fullKey),
      payload: { stepId, resultData } as object,
    });
  const cancel = (fullKey: string, sessionId: string, payload?: string) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${sessionId}/cancel`,
      headers: payload === undefined ? auth(fullKey) : { ...auth(fullKey), 'content-type': 'application/json' },
      ...(payload === undefined ? {} : { payload }),
    });
  const get = (fullKey: string, url: string) => app.inject({ method: 'GET', url, headers: auth(fullKey) });
  const newAgentKey = async (owner: TestAccount, name: string) =>
    expectOk<{ fullKey: string; agentKey: { id: string } }>(
      await app.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: auth(owner.fullKey), payload: { name } }),
      201,
    );

  it('refuses a lone surrogate or NUL in resultData, a cancel reason or a slot name with 400 naming the field, and the session goes on', async () => {
    const owner = await createTestAccount(app.deps.sql);
    const session = await startWeather(owner.fullKey);
    const url = `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`;
    const headers = { ...auth(owner.fullKey), 'content-type': 'application/json' };
    // Written as JSON text: JSON.stringify escapes a lone surrogate the same way.
    const resultData = JSON.stringify(FORECAST).replace('"Oslo"', '"Oslo \\ud800"');
    const began = Date.now();
    const lone = expectError(
      await app.inject({ method: 'POST', url, headers, payload: `{"stepId": "fetch-forecast", "resultData": ${resultData}}` }),
      400,
      'validation_failed',
    );
    expect(lone.hint).toContain('resultData.location.name');
    expect(Date.now() - began).toBeLessThan(3_000);
    const nul = expectError(
      await app.inject({ method: 'POST', url, headers, payload: `{"stepId": "fetch-forecast", "resultData": {"\\u0000": 1}}` }),
      400,
      'validation_failed',
    );
    expect(nul.hint).toContain('a key of resultData');
    const reason = expectError(await cancel(owner.fullKey, session.sessionId, '{"reason": "\\udc00"}'), 400, 'validation_failed');
    expect(reason.hint).toContain('reason');
    const slot = expectError(
      await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers,
        payload: `{"selectedApis": {"weather\\ud800": "${weatherApi}"}}`,
      }),
      400,
      'validation_failed',
    );
    expect(slot.hint).toContain('a key of selectedApis');

    // Nothing reached the workflow: the step completes and the session cancels as usual.
    const next = expectOk<{ session: Session }>(await complete(owner.fullKey, session.sessionId, 'fetch-forecast', FORECAST));
    expect(next.session.currentStep).toBe('draft-message');
    expect(expectOk<{ session: Session }>(await cancel(owner.fullKey, session.sessionId)).session.status).toBe('cancelled');
  });

  it("shows a session's current and past steps in full but only the outline of steps it has not reached: the free path does not give away the paid details", async () => {
    const owner = await createTestAccount(app.deps.sql);
    const cookbook = (await getCookbook(app.deps.sql, 'weather-alert-sms'))!;
    const session = await startWeather(owner.fullKey);
    const view = async () => {
      const res = await get(owner.fullKey, `/api/v1/cookbooks/sessions/${session.sessionId}`);
      return { body: res.body, steps: expectOk<{ session: { steps: Step[] } }>(res).session.steps };
    };
    const paidParts = (from: number) =>
      cookbook.steps.slice(from).flatMap((step) => [step.instructions.slice(0, 60), JSON.stringify(step.inputSchema)]);

    const first = await view();
    expect(first.steps.map((step) => [step.stepId, step.title])).toEqual(cookbook.steps.map((step) => [step.stepId, step.title]));
    expect(first.steps[0]).toMatchObject({ stepId: 'fetch-forecast', status: 'pending', inputSchema: cookbook.steps[0]!.inputSchema });
    expect(first.steps[0]!.instructions).toContain(`/api/v1/proxy/${weatherApi}`);
    for (const step of first.steps.slice(1)) expect(step, first.body).toMatchObject({ status: 'upcoming', instructions: null, inputSchema: null });
    for (const part of paidParts(1)) expect(first.body).not.toContain(part);

    // One step on: the step just done and the new current one are shown, the rest still are not.
    expectOk(await complete(owner.fullKey, session.sessionId, 'fetch-forecast', FORECAST));
    const second = await view();
    expect(second.steps[1]).toMatchObject({ stepId: 'draft-message', status: 'pending', inputSchema: cookbook.steps[1]!.inputSchema });
    expect(second.steps[0]!.instructions).not.toBeNull();
    for (const part of paidParts(2)) expect(second.body).not.toContain(part);

    // Start, read, cancel: the cancelled session reveals no more than it had reached.
    expectOk(await cancel(owner.fullKey, session.sessionId));
    const cancelled = await view();
    for (const step of cancelled.steps.slice(2)) expect(step, cancelled.body).toMatchObject({ instructions: null, inputSchema: null });
    for (const part of paidParts(2)) expect(cancelled.body).not.toContain(part);
  });

  it(`caps the sessions an account has active at ${SESSION_CAP}: the next start is 409 naming the cap, and cancelling one frees a slot`, async () => {
    const owner = await createTestAccount(app.deps.sql);
    const replayKey = uniqueId('idem-');
    const sessions = [await startWeather(owner.fullKey), await startWeather(owner.fullKey)];
    sessions.push(expectOk<{ session: Session }>(await start(owner.fullKey, { 'idempotency-key': replayKey }), 201).session);
    const refused = expectError(await start(owner.fullKey), 409, 'conflict');
    expect(refused.error).toContain(String(SESSION_CAP));
    expect(refused.hint).toMatch(/cancel/);
    // Racing starts do not slip past the cap either.
    const raced = await Promise.all([start(owner.fullKey), start(owner.fullKey)]);
    for (const res of raced) expectError(res, 409, 'conflict');
    // A retry of a start that succeeded is answered with its session, not refused.
    const replay = await start(owner.fullKey, { 'idempotency-key': replayKey });
    expect(expectOk<{ session: Session }>(replay, 201).session.sessionId).toBe(sessions[2]!.sessionId);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    // Another account is not affected.
    await startWeather((await createTestAccount(app.deps.sql)).fullKey);

    expectOk(await cancel(owner.fullKey, sessions[0]!.sessionId));
    await startWeather(owner.fullKey);
    expectError(await start(owner.fullKey), 409, 'conflict');
  });

  it(`caps webhook test deliveries at ${TEST_DELIVERY_CAP} an hour per account: the next is 429 with Retry-After and a hint saying when`, async () => {
    const owner = await createTestAccount(app.deps.sql);
    const register = async () =>
      expectOk<{ webhook: { id: string } }>(
        await app.inject({
          method: 'POST',
          url: '/api/v1/webhooks',
          headers: auth(owner.fullKey),
          payload: { url: 'http://127.0.0.1:9/hooks', eventTypes: ['webhook.test'] },
        }),
        201,
      ).webhook.id;
    const [one, two] = [await register(), await register()];
    const test = (id: string) => app.inject({ method: 'POST', url: `/api/v1/webhooks/${id}/test`, headers: auth(owner.fullKey) });
    // Concurrent tests are counted one by one: exactly the cap get through.
    const answers = await Promise.all([test(one), test(two), test(one), test(two), test(one)]);
    expect(answers.map((res) => res.statusCode).sort()).toEqual([202, 202, 202, 429, 429]);
    const answer = await test(two);
    const refused = expectError(answer, 429, 'rate_limited');
    const retryAfter = Number(answer.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(3_500);
    expect(retryAfter).toBeLessThanOrEqual(3_600);
    expect(refused.error).toContain(String(TEST_DELIVERY_CAP));
    expect(refused.hint).toMatch(/\d+ seconds/);
    // Another account has its own budget.
    const other = await createTestAccount(app.deps.sql);
    const otherHook = expectOk<{ webhook: { id: string } }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: auth(other.fullKey),
        payload: { url: 'http://127.0.0.1:9/hooks', eventTypes: ['webhook.test'] },
      }),
      201,
    ).webhook.id;
    expectOk(await app.inject({ method: 'POST', url: `/api/v1/webhooks/${otherHook}/test`, headers: auth(other.fullKey) }), 202);
  });

  it("keeps an agent key to the sessions it started: another agent key of the account gets 404 on every session route, the account's API key sees all", async () => {
    const owner = await createTestAccount(app.deps.sql);
    const alice = await newAgentKey(owner, 'agent alice');
    const bob = await newAgentKey(owner, 'agent bob');
    const idempotencyKey = uniqueId('idem-');
    const aliceSession = expectOk<{ session: Session }>(await start(alice.fullKey, { 'idempotency-key': idempotencyKey }), 201).session;
    const bobSession = await startWeather(bob.fullKey);
    const base = `/api/v1/cookbooks/sessions/${aliceSession.sessionId}`;

    // Alice's session reaches its human step, so it shows in human-step lists too.
    expectOk(await complete(alice.fullKey, aliceSession.sessionId, 'fetch-forecast', FORECAST));
    expectOk(await complete(alice.fullKey, aliceSession.sessionId, 'draft-message', DRAFT));

    for (const path of ['', '/step', '/human-steps', '/events', '/event-log'])
      expectError(await get(bob.fullKey, `${base}${path}`), 404, 'not_found');
    expectError(await complete(bob.fullKey, aliceSession.sessionId, 'approve-wording', { approved: true }), 404, 'not_found');
    expectError(await cancel(bob.fullKey, aliceSession.sessionId), 404, 'not_found');
    const ids = async (fullKey: string, url: string, field: 'sessions' | 'humanSteps') =>
      (expectOk<Record<string, { sessionId: string }[]>>(await get(fullKey, url))[field] ?? []).map((entry) => entry.sessionId);
    expect(await ids(bob.fullKey, '/api/v1/cookbooks/sessions?status=all', 'sessions')).toEqual([bobSession.sessionId]);
    expect(await ids(bob.fullKey, '/api/v1/me/human-steps', 'humanSteps')).toEqual([]);
    // The same Idempotency-Key from another agent key is a conflict that does not name Alice's session.
    const replay = expectError(await start(bob.fullKey, { 'idempotency-key': idempotencyKey }), 409, 'idempotency_conflict');
    expect(JSON.stringify(replay)).not.toContain(aliceSession.sessionId);

    // Alice still has her own; the account's API key sees and lists both.
    expect(await ids(alice.fullKey, '/api/v1/cookbooks/sessions', 'sessions')).toEqual([aliceSession.sessionId]);
    expect(await ids(alice.fullKey, '/api/v1/me/human-steps', 'humanSteps')).toEqual([aliceSession.sessionId]);
    expect((await ids(owner.fullKey, '/api/v1/cookbooks/sessions', 'sessions')).sort()).toEqual(
      [aliceSession.sessionId, bobSession.sessionId].sort(),
    );
    expectOk(await get(owner.fullKey, base));
    expect(expectOk<{ session: Session }>(await cancel(alice.fullKey, aliceSession.sessionId)).session.status).toBe('cancelled');
  });
});
