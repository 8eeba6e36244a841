import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks, readCookbookFiles, upsertCookbook } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { completeStepUpdate, workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, openSse, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { loginUser, registerUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

interface Session {
  sessionId: string;
  cookbookId: string;
  status: string;
  currentStep: string | null;
  progress: { completed: number; total: number };
  selectedApis: Record<string, string>;
}
interface Step {
  stepId: string;
  kind: string;
  instructions: string;
  status: string;
  completedBy: string;
}

const FORECAST = { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning', severity: 'severe' }] };
const DRAFT = { message: 'Storm tonight from 20:00. Stay indoors.', recipients: ['+4712345678'] };

describe('cookbook sessions over REST, on Temporal', () => {
  const taskQueue = uniqueId('cookbook-sessions-');
  const redisPrefix = uniqueId('cbs');
  let app: FastifyInstance;
  let baseUrl: string;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let account: TestAccount;
  let weatherApi: string;
  let smsApi: string;

  beforeAll(async () => {
    // Keys are not re-checked during the file: one test deletes an account (its keys go with it) and
    // follows its stream to the end; streams of dead keys closing is sse-limits.test.ts's subject.
    app = await createTestApp({
      TEMPORAL_TASK_QUEUE: taskQueue,
      REDIS_PREFIX: redisPrefix,
      SSE_HEARTBEAT_MS: '200',
      SSE_MAX_STREAMS_PER_ACCOUNT: '1000',
      SSE_KEY_RECHECK_MS: '300000',
    });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(app.deps.sql);
    weatherApi = await createTestApi(app.deps.sql, 'weather');
    smsApi = await createTestApi(app.deps.sql, 'sms');
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
  });

  const auth = (who: TestAccount = account) => bearer(who.fullKey);
  const start = (body: unknown, who: TestAccount = account, headers: Record<string, string> = {}, cookbook = 'weather-alert-sms') =>
    app.inject({ method: 'POST', url: `/api/v1/cookbooks/${cookbook}/start`, headers: { ...auth(who), ...headers }, payload: body as object });
  const startWeather = async (who: TestAccount = account) =>
    expectOk<{ session: Session }>(await start({ selectedApis: { weather: weatherApi, sms: smsApi } }, who), 201).session;
  const complete = (sessionId: string, stepId: string, resultData: unknown, who: TestAccount = account) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`,
      headers: auth(who),
      payload: { stepId, resultData } as object,
    });
  const get = (url: string, who: TestAccount = account) => app.inject({ method: 'GET', url, headers: auth(who) });
  const humanComplete = (sessionId: string, stepId: string, resultData: Record<string, unknown>) =>
    app.deps.temporal.client.workflow
      .getHandle(workflowIdFor(sessionId))
      .executeUpdate(completeStepUpdate, { args: [{ stepId, resultData, actor: 'human' }] });

  it('runs a whole session: agent steps, a pending human step, completion, with every event in order on the stream', async () => {
    const session = await startWeather();
    expect(session).toMatchObject({
      cookbookId: 'weather-alert-sms',
      status: 'running',
      currentStep: 'fetch-forecast',
      progress: { completed: 0, total: 4 },
    });
    expect(session.sessionId).toMatch(/^ses_[a-f0-9]{24}$/);
    const stream = await openSse(baseUrl, `/api/v1/cookbooks/sessions/${session.sessionId}/events`, auth());
    expect(stream.response.statusCode).toBe(200);
    expect(stream.response.headers['content-type']).toMatch(/^text\/event-stream/);

    const step = expectOk<{ step: Step }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}/step`)).step;
    expect(step).toMatchObject({ stepId: 'fetch-forecast', kind: 'agent', status: 'pending', completedBy: 'key' });
    expect(step.instructions).toContain(`/api/v1/proxy/${weatherApi}`);
    expect(step.instructions).not.toContain('{{');

    const first = expectOk<{ session: Session; nextStep: Step }>(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    expect(first.session).toMatchObject({ status: 'running', currentStep: 'draft-message', progress: { completed: 1, total: 4 } });
    expect(first.nextStep).toMatchObject({ stepId: 'draft-message', status: 'pending' });

    const second = expectOk<{ session: Session; nextStep: Step }>(await complete(session.sessionId, 'draft-message', DRAFT));
    expect(second.session).toMatchObject({ status: 'waiting_for_human', currentStep: 'approve-wording', progress: { completed: 2, total: 4 } });
    expect(second.nextStep).toMatchObject({ stepId: 'approve-wording', kind: 'human', completedBy: 'human' });

    const pending = expectOk<{ humanSteps: { sessionId: string; stepId: string; cookbookTitle: string; expiresAt: string }[] }>(
      await get(`/api/v1/cookbooks/sessions/${session.sessionId}/human-steps`),
    );
    expect(pending.humanSteps).toHaveLength(1);
    expect(pending.humanSteps[0]).toMatchObject({
      sessionId: session.sessionId,
      stepId: 'approve-wording',
      cookbookTitle: expect.stringContaining('SMS'),
    });
    // The person is shown what they approve: the drafted SMS and its recipients, and where the alert is.
    expect((pending.humanSteps[0] as unknown as { context: unknown }).context).toEqual([
      {
        stepId: 'draft-message',
        title: 'Draft the SMS wording',
        fields: [
          { name: 'message', value: DRAFT.message },
          { name: 'recipients', value: DRAFT.recipients },
        ],
      },
      {
        stepId: 'fetch-forecast',
        title: 'Fetch the forecast and active alerts',
        fields: [
          { name: 'location', value: FORECAST.location },
          { name: 'alerts', value: FORECAST.alerts },
        ],
      },
    ]);
    const inbox = expectOk<{ humanSteps: { sessionId: string; cookbookId: string }[] }>(await get('/api/v1/me/human-steps'));
    expect(inbox.humanSteps.filter((h) => h.sessionId === session.sessionId)).toEqual([expect.objectContaining({ cookbookId: 'weather-alert-sms' })]);

    // A person approves (the dashboard's cookie session sends actor 'human'; here through Temporal).
    const approved = await humanComplete(session.sessionId, 'approve-wording', { approved: true });
    expect(approved.session).toMatchObject({ status: 'running', currentStep: 'send-sms' });
    expect(expectOk<{ humanSteps: unknown[] }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}/human-steps`)).humanSteps).toEqual([]);

    const last = expectOk<{ session: Session; nextStep: null }>(await complete(session.sessionId, 'send-sms', { messageIds: ['SM1'] }));
    expect(last.session).toMatchObject({ status: 'completed', currentStep: null, progress: { completed: 4, total: 4 } });
    expect(last.nextStep).toBeNull();

    // History, server-side: who completed each step (the key's name; the approval went straight to
    // Temporal here, so nobody is recorded for it), and the ended session in the ended list.
    const done = expectOk<{ session: { steps: { stepId: string; completedByName: string | null }[] } }>(
      await get(`/api/v1/cookbooks/sessions/${session.sessionId}`),
    );
    expect(done.session.steps.map((step) => [step.stepId, step.completedByName])).toEqual([
      ['fetch-forecast', 'test key'],
      ['draft-message', 'test key'],
      ['approve-wording', null],
      ['send-sms', 'test key'],
    ]);
    const listed = async (status?: string) =>
      expectOk<{ sessions: Session[] }>(await get(`/api/v1/cookbooks/sessions${status ? `?status=${status}` : ''}`)).sessions.map((s) => s.sessionId);
    expect(await listed('ended')).toContain(session.sessionId);
    expect(await listed('all')).toContain(session.sessionId);
    expect(await listed('active')).not.toContain(session.sessionId);
    expect(await listed()).not.toContain(session.sessionId);
    expectError(await get('/api/v1/cookbooks/sessions?status=finished'), 400, 'validation_failed');

    await stream.ended;
    expect(
      stream.events.map((e) => `${e.event}${(e.data as { stepId?: string }).stepId ? `:${(e.data as { stepId: string }).stepId}` : ''}`),
    ).toEqual([
      'session.started',
      'step.started:fetch-forecast',
      'step.completed:fetch-forecast',
      'step.started:draft-message',
      'step.completed:draft-message',
      'step.started:approve-wording',
      'human_step.pending:approve-wording',
      'step.completed:approve-wording',
      'human_step.completed:approve-wording',
      'step.started:send-sms',
      'step.completed:send-sms',
      'session.completed',
    ]);
    expect(stream.events.map((e) => e.id)).toEqual(stream.events.map((_, i) => `${i + 1}-0`));

    const detail = expectOk<{ session: Session & { steps: (Step & { resultData: unknown })[] } }>(
      await get(`/api/v1/cookbooks/sessions/${session.sessionId}`),
    );
    expect(detail.session.status).toBe('completed');
    expect(detail.session.steps.map((s) => [s.stepId, s.status])).toEqual([
      ['fetch-forecast', 'completed'],
      ['draft-message', 'completed'],
      ['approve-wording', 'completed'],
      ['send-sms', 'completed'],
    ]);
    expect(detail.session.steps[0]!.resultData).toEqual(FORECAST);
    expect(detail.session.steps[2]).toMatchObject({ completedBy: 'human' });

    expectError(await get(`/api/v1/cookbooks/sessions/${session.sessionId}/step`), 409, 'conflict');
    expectError(await complete(session.sessionId, 'send-sms', { messageIds: [] }), 409, 'conflict');
    const active = expectOk<{ sessions: Session[] }>(await get('/api/v1/cookbooks/sessions'));
    expect(active.sessions.map((s) => s.sessionId)).not.toContain(session.sessionId);
  });
  it('lets a person signed in to the dashboard complete the human step over REST (cookie session, CSRF token)', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const agentKey = { ...account, accountId: user.accountId, fullKey: user.fullKey };
    const session = await startWeather(agentKey);
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST, agentKey));
    expectOk(await complete(session.sessionId, 'draft-message', DRAFT, agentKey));
    // The key is refused on the human step; the same account's browser session is not.
    expectError(await complete(session.sessionId, 'approve-wording', { approved: true }, agentKey), 403, 'forbidden');

    const inbox = await app.inject({ method: 'GET', url: '/api/v1/me/human-steps', headers: { cookie: browser.cookie } });
    expect(expectOk<{ humanSteps: { sessionId: string; stepId: string }[] }>(inbox).humanSteps).toEqual([
      expect.objectContaining({ sessionId: session.sessionId, stepId: 'approve-wording' }),
    ]);
    const url = `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`;
    const payload = { stepId: 'approve-wording', resultData: { approved: true, editedMessage: 'Storm tonight. Stay in.' } };
    // Without the CSRF token the cookie alone is refused.
    expectError(await app.inject({ method: 'POST', url, headers: { cookie: browser.cookie }, payload }), 403);
    // Schema errors are still 400 for a person.
    expectError(
      await app.inject({
        method: 'POST',
        url,
        headers: browser.writeHeaders,
        payload: { stepId: 'approve-wording', resultData: { approved: 'yes' } },
      }),
      400,
      'validation_failed',
    );
    const done = expectOk<{ session: Session; nextStep: Step }>(await app.inject({ method: 'POST', url, headers: browser.writeHeaders, payload }));
    expect(done.session).toMatchObject({ status: 'running', currentStep: 'send-sms', progress: { completed: 3, total: 4 } });
    expect(done.nextStep).toMatchObject({ stepId: 'send-sms', kind: 'agent' });

    const detail = expectOk<{ session: { steps: { stepId: string; completedBy: string | null; resultData: unknown }[] } }>(
      await get(`/api/v1/cookbooks/sessions/${session.sessionId}`, agentKey),
    );
    expect(detail.session.steps.find((s) => s.stepId === 'approve-wording')).toMatchObject({ completedBy: 'human', resultData: payload.resultData });
    expect(
      expectOk<{ humanSteps: unknown[] }>(await app.inject({ method: 'GET', url: '/api/v1/me/human-steps', headers: { cookie: browser.cookie } }))
        .humanSteps,
    ).toEqual([]);
  });

  it('answers each completion with the session and next step that Postgres then holds, a request for changes and the end included', async () => {
    // The answer comes from the Update's result, not from reading the mirror back: it must be what a read shows.
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const owner = { ...account, accountId: user.accountId, fullKey: user.fullKey };
    const session = await startWeather(owner);
    const url = `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`;
    type Answer = { session: Record<string, unknown>; nextStep: { stepId: string } | null };
    type Detail = { session: Record<string, unknown> & { steps: { stepId: string; completedByName: string | null }[] } };
    const read = async () => expectOk<Detail>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}`, owner)).session;
    const expectAsRead = async (answer: Answer) => {
      const { cookbookTitle: _title, steps, ...mirrored } = await read();
      expect(answer.session).toEqual(mirrored);
      expect(answer.nextStep).toEqual(answer.nextStep === null ? null : steps.find((step) => step.stepId === answer.nextStep!.stepId));
      return answer;
    };
    const byPerson = async (payload: Record<string, unknown>) =>
      expectOk<Answer>(await app.inject({ method: 'POST', url, headers: browser.writeHeaders, payload }));

    await expectAsRead(expectOk<Answer>(await complete(session.sessionId, 'fetch-forecast', FORECAST, owner)));
    expect(await expectAsRead(expectOk<Answer>(await complete(session.sessionId, 'draft-message', DRAFT, owner)))).toMatchObject({
      session: { status: 'waiting_for_human', currentStep: 'approve-wording' },
      nextStep: { stepId: 'approve-wording', status: 'pending', expiresAt: expect.any(String) },
    });
    // Sent back to the draft: the next step is the redraft, carrying the person's note.
    const sentBack = await expectAsRead(
      await byPerson({ stepId: 'approve-wording', resultData: {}, decision: 'request_changes', note: 'Say when it starts.' }),
    );
    expect(sentBack).toMatchObject({
      session: { currentStep: 'draft-message' },
      nextStep: { stepId: 'draft-message', feedback: { fromStepId: 'approve-wording', note: 'Say when it starts.' } },
    });
    const redraft = { ...DRAFT, message: 'Storm from 20:00 tonight. Stay indoors.' };
    await expectAsRead(expectOk<Answer>(await complete(session.sessionId, 'draft-message', redraft, owner)));
    await expectAsRead(await byPerson({ stepId: 'approve-wording', resultData: { approved: true } }));
    const last = await expectAsRead(expectOk<Answer>(await complete(session.sessionId, 'send-sms', { messageIds: ['SM1'] }, owner)));
    expect(last).toMatchObject({ session: { status: 'completed', currentStep: null, endedAt: expect.any(String) }, nextStep: null });
    // Who completed each step, recorded with the step by the workflow's activity: the key, then the person.
    expect((await read()).steps.map((step) => [step.stepId, step.completedByName])).toEqual([
      ['fetch-forecast', 'default'],
      ['draft-message', 'default'],
      ['approve-wording', user.email],
      ['send-sms', 'default'],
    ]);
  });

  it('applies a redraft that repeats the first draft word for word after a request for changes', async () => {
    // The same completion of the same step in a later round is a new completion, not a retry of the first.
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const owner = { ...account, accountId: user.accountId, fullKey: user.fullKey };
    const session = await startWeather(owner);
    const url = `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`;
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST, owner));
    expectOk(await complete(session.sessionId, 'draft-message', DRAFT, owner));
    expectOk(
      await app.inject({
        method: 'POST',
        url,
        headers: browser.writeHeaders,
        payload: { stepId: 'approve-wording', resultData: {}, decision: 'request_changes', note: 'Check it once more.' },
      }),
    );
    const again = expectOk<{ session: { currentStep: string }; nextStep: { stepId: string } | null }>(
      await complete(session.sessionId, 'draft-message', DRAFT, owner),
    );
    expect(again).toMatchObject({ session: { currentStep: 'approve-wording' }, nextStep: { stepId: 'approve-wording', status: 'pending' } });
    // What a read shows agrees: the draft went to the person again.
    expect(
      expectOk<{ session: { currentStep: string } }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}`, owner)).session.currentStep,
    ).toBe('approve-wording');
    // And a retry of that second completion (its answer lost) still gets the same answer, once.
    const retried = expectOk<{ session: { currentStep: string } }>(await complete(session.sessionId, 'draft-message', DRAFT, owner));
    expect(retried.session.currentStep).toBe('approve-wording');
  });

  it("uses a session's cookbook cached in process only while it is current: a re-seeded cookbook counts on its next use", async () => {
    const original = (await readCookbookFiles()).find((book) => book.id === 'weather-alert-sms')!;
    const id = uniqueId('cache-check-');
    await upsertCookbook(app.deps.sql, { ...original, id });
    const session = expectOk<{ session: Session }>(await start({ selectedApis: { weather: weatherApi, sms: smsApi } }, account, {}, id), 201).session;
    const current = async () => expectOk<{ step: Step & { title: string } }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}/step`)).step;
    expect((await current()).title).toBe(original.steps[0]!.title);

    // The operator changes the first step's wording and schema (as `npm run seed` does after a file changed).
    const [first, ...rest] = original.steps;
    const schema = first!.inputSchema as { required: string[]; properties: Record<string, unknown> };
    const revised = {
      ...first!,
      title: 'Fetch the forecast (revised)',
      inputSchema: { ...schema, required: [...schema.required, 'checkedAt'], properties: { ...schema.properties, checkedAt: { type: 'string' } } },
    };
    await upsertCookbook(app.deps.sql, { ...original, id, steps: [revised, ...rest] });
    expect((await current()).title).toBe('Fetch the forecast (revised)');
    expect(expectError(await complete(session.sessionId, 'fetch-forecast', FORECAST), 400, 'validation_failed').error).toContain('checkedAt');
    expectOk(await complete(session.sessionId, 'fetch-forecast', { ...FORECAST, checkedAt: '2026-11-25T06:00:00Z' }));
  });

  it('refuses bad starts: unknown cookbook 404, missing or unknown slots and unknown APIs 400 naming the slot', async () => {
    expectError(await start({ selectedApis: { weather: weatherApi, sms: smsApi } }, account, {}, 'no-such-cookbook'), 404, 'not_found');
    const missing = expectError(await start({ selectedApis: { weather: weatherApi } }), 400, 'validation_failed');
    expect(missing.error).toContain('"sms"');
    const unknownSlot = expectError(await start({ selectedApis: { weather: weatherApi, sms: smsApi, fax: smsApi } }), 400, 'validation_failed');
    expect(unknownSlot.error).toContain('"fax"');
    const unknownApi = expectError(await start({ selectedApis: { weather: weatherApi, sms: 'no-such-api-xyz' } }), 400, 'validation_failed');
    expect(unknownApi.error).toContain('"sms"');
    expect(unknownApi.error).toContain('no-such-api-xyz');
    expectError(await start({ selectedApis: 'weather' }), 400, 'validation_failed');
    expectError(await start({ selectedApis: { weather: 7 } }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/v1/cookbooks/weather-alert-sms/start', headers: auth() }), 400, 'body_missing');
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/cookbooks/weather-alert-sms/start', payload: { selectedApis: {} } }),
      401,
      'missing_credentials',
    );
    expectError(
      await start({ selectedApis: { weather: weatherApi, sms: smsApi } }, account, { 'idempotency-key': 'has space' }),
      400,
      'validation_failed',
    );
    const [row] = await app.deps.sql<
      { n: number }[]
    >`select count(*)::int as n from cookbook_sessions where account_id = ${account.accountId} and selected_apis ? 'fax'`;
    expect(row!.n).toBe(0);
  });

  it('answers the same session for the same Idempotency-Key, even when the retries race', async () => {
    const who = await createTestAccount(app.deps.sql);
    const key = uniqueId('idem-');
    const body = { selectedApis: { weather: weatherApi, sms: smsApi } };
    const [a, b] = await Promise.all([start(body, who, { 'idempotency-key': key }), start(body, who, { 'idempotency-key': key })]);
    const first = expectOk<{ session: Session }>(a, 201).session;
    expect(expectOk<{ session: Session }>(b, 201).session.sessionId).toBe(first.sessionId);
    const again = await start(body, who, { 'idempotency-key': key });
    expect(expectOk<{ session: Session }>(again, 201).session.sessionId).toBe(first.sessionId);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const other = expectOk<{ session: Session }>(await start(body, who, { 'idempotency-key': `${key}-2` }), 201).session;
    expect(other.sessionId).not.toBe(first.sessionId);
    // The same key of another account is another session.
    const stranger = expectOk<{ session: Session }>(await start(body, account, { 'idempotency-key': key }), 201).session;
    expect(stranger.sessionId).not.toBe(first.sessionId);
    const active = expectOk<{ sessions: Session[] }>(await get('/api/v1/cookbooks/sessions', who)).sessions.map((s) => s.sessionId);
    expect(active.sort()).toEqual([first.sessionId, other.sessionId].sort());
  });

  it('answers 409 idempotency_conflict when a replayed Idempotency-Key comes with another request body', async () => {
    const who = await createTestAccount(app.deps.sql);
    const key = uniqueId('idem-');
    const first = expectOk<{ session: Session }>(
      await start({ selectedApis: { weather: weatherApi, sms: smsApi } }, who, { 'idempotency-key': key }),
      201,
    ).session;
    // The same request with its keys in another order is the same request: a replay.
    const reordered = await start({ selectedApis: { sms: smsApi, weather: weatherApi } }, who, { 'idempotency-key': key });
    expect(expectOk<{ session: Session }>(reordered, 201).session.sessionId).toBe(first.sessionId);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    // Another body (an extra slot, another API, a missing slot) or another cookbook: 409, nothing started.
    for (const selectedApis of [
      { weather: weatherApi, sms: smsApi, geocoder: weatherApi },
      { weather: smsApi, sms: smsApi },
      { weather: weatherApi },
    ]) {
      const conflict = expectError(await start({ selectedApis }, who, { 'idempotency-key': key }), 409, 'idempotency_conflict');
      expect(conflict.hint).toContain(first.sessionId);
    }
    expectError(
      await start({ selectedApis: { translator: weatherApi, email: smsApi } }, who, { 'idempotency-key': key }, 'translate-and-email'),
      409,
      'idempotency_conflict',
    );
    // Two different bodies racing with one new key: exactly one starts the session, the other is 409.
    const raceKey = uniqueId('idem-race-');
    const [a, b] = await Promise.all([
      start({ selectedApis: { weather: weatherApi, sms: smsApi } }, who, { 'idempotency-key': raceKey }),
      start({ selectedApis: { weather: smsApi, sms: weatherApi } }, who, { 'idempotency-key': raceKey }),
    ]);
    expect([a.statusCode, b.statusCode].sort(), `${a.body}\n${b.body}`).toEqual([201, 409]);
    expectError(a.statusCode === 409 ? a : b, 409, 'idempotency_conflict');
    const [row] = await app.deps.sql<{ n: number }[]>`select count(*)::int as n from cookbook_sessions where account_id = ${who.accountId}`;
    expect(row!.n).toBe(2);
  });

  it('pages the active sessions with limit, cursor and nextCursor, newest first', async () => {
    const who = await createTestAccount(app.deps.sql);
    const started: string[] = [];
    for (let i = 0; i < 5; i++) started.push((await startWeather(who)).sessionId);
    const newestFirst = [...started].reverse();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${encodeURIComponent(cursor)}`;
      const page = expectOk<{ sessions: Session[]; nextCursor: string | null }>(await get(`/api/v1/cookbooks/sessions${query}`, who));
      expect(page.sessions.length).toBeLessThanOrEqual(2);
      seen.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual(newestFirst);
    expect(pages).toBe(3);
    // The default page holds them all and ends the list.
    const all = expectOk<{ sessions: Session[]; nextCursor: string | null }>(await get('/api/v1/cookbooks/sessions', who));
    expect(all.sessions.map((s) => s.sessionId)).toEqual(newestFirst);
    expect(all.nextCursor).toBeNull();
    // A cursor whose session has ended since still pages on after it; ended sessions are not listed.
    const firstPage = expectOk<{ sessions: Session[]; nextCursor: string }>(await get('/api/v1/cookbooks/sessions?limit=2', who));
    expectOk(await app.inject({ method: 'POST', url: `/api/v1/cookbooks/sessions/${firstPage.nextCursor}/cancel`, headers: auth(who) }));
    const after = expectOk<{ sessions: Session[] }>(await get(`/api/v1/cookbooks/sessions?cursor=${firstPage.nextCursor}`, who));
    expect(after.sessions.map((s) => s.sessionId)).toEqual(newestFirst.slice(2));
    // Bad paging input: 400 in the error shape. Another account's session id is not a cursor here.
    expectError(await get('/api/v1/cookbooks/sessions?limit=0', who), 400, 'validation_failed');
    expectError(await get('/api/v1/cookbooks/sessions?limit=201', who), 400, 'validation_failed');
    expectError(await get('/api/v1/cookbooks/sessions?cursor=ses_nope', who), 400, 'validation_failed');
    expectError(await get(`/api/v1/cookbooks/sessions?cursor=${started[0]}`), 400, 'validation_failed');
  });

  it('requires a credential on every session route, and lets an agent key run a session', async () => {
    const session = await startWeather();
    const base = `/api/v1/cookbooks/sessions/${session.sessionId}`;
    const calls: [string, string][] = [
      ['POST', '/api/v1/cookbooks/weather-alert-sms/start'],
      ['GET', '/api/v1/cookbooks/sessions'],
      ['GET', base],
      ['GET', `${base}/step`],
      ['POST', `${base}/complete-step`],
      ['GET', `${base}/human-steps`],
      ['GET', `${base}/events`],
      ['POST', `${base}/cancel`],
      ['GET', '/api/v1/me/human-steps'],
    ];
    for (const [method, url] of calls) {
      expectError(
        await app.inject({ method: method as 'GET' | 'POST', url, payload: method === 'POST' ? {} : undefined }),
        401,
        'missing_credentials',
      );
      expectError(await app.inject({ method: method as 'GET' | 'POST', url, headers: bearer(`service_sk_${'0'.repeat(48)}`) }), 401);
    }
    const agent = await createTestAccount(app.deps.sql, { keyKind: 'agent' });
    const agentSession = await startWeather(agent);
    expectOk(await complete(agentSession.sessionId, 'fetch-forecast', FORECAST, agent));
    expect(expectOk<{ sessions: Session[] }>(await get('/api/v1/cookbooks/sessions', agent)).sessions.map((s) => s.sessionId)).toEqual([
      agentSession.sessionId,
    ]);
  });

  it("answers 404 for another account's session on every session route", async () => {
    const session = await startWeather();
    const other = await createTestAccount(app.deps.sql);
    const base = `/api/v1/cookbooks/sessions/${session.sessionId}`;
    for (const path of ['', '/step', '/human-steps', '/events']) expectError(await get(`${base}${path}`, other), 404, 'not_found');
    expectError(await complete(session.sessionId, 'fetch-forecast', FORECAST, other), 404, 'not_found');
    expectError(await app.inject({ method: 'POST', url: `${base}/cancel`, headers: auth(other) }), 404, 'not_found');
    expectError(await get('/api/v1/cookbooks/sessions/ses_doesnotexist'), 404, 'not_found');
    // The owner's session is untouched.
    expect(expectOk<{ session: Session }>(await get(base)).session.progress.completed).toBe(0);
  });

  it('rejects a stale step with 409, a resultData that breaks the schema with 400, and a key completing a human step with 403, before history', async () => {
    const session = await startWeather();
    expectError(await complete(session.sessionId, 'draft-message', DRAFT), 409, 'conflict');
    expectError(await complete(session.sessionId, 'no-such-step', {}), 409, 'conflict');
    const invalid = expectError(
      await complete(session.sessionId, 'fetch-forecast', { location: { lat: 200, lon: 0 }, severe: 'yes' }),
      400,
      'validation_failed',
    );
    expect(invalid.error).toMatch(/resultData\.location\.lat|resultData\.severe|alerts/);
    expectError(
      await app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`,
        headers: auth(),
        payload: { stepId: 'fetch-forecast' },
      }),
      400,
      'validation_failed',
    );
    const first = expectOk<{ nextStep: Step }>(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    // Retrying that completion (its answer lost to a timeout or a 503) gets the same answer, not 409;
    // another resultData for the step just done is stale.
    const retried = expectOk<{ nextStep: Step; session: Session }>(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    expect(retried.nextStep.stepId).toBe(first.nextStep.stepId);
    expect(retried.session.currentStep).toBe('draft-message');
    expectError(await complete(session.sessionId, 'fetch-forecast', { ...FORECAST, severe: false }), 409, 'conflict');
    expectOk(await complete(session.sessionId, 'draft-message', DRAFT));
    const forbidden = expectError(await complete(session.sessionId, 'approve-wording', { approved: true }), 403, 'forbidden');
    expect(forbidden.error).toContain('person');

    // The workflow validator also refuses a stale step sent straight to Temporal (the edge's mirror check bypassed).
    const handle = app.deps.temporal.client.workflow.getHandle(workflowIdFor(session.sessionId));
    await expect(handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'fetch-forecast', resultData: {}, actor: 'key' }] })).rejects.toThrow();
    await expect(handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'approve-wording', resultData: {}, actor: 'key' }] })).rejects.toThrow();

    // Rejected updates never reached history: only the two accepted completions are there.
    const history = await handle.fetchHistory();
    const accepted = history.events?.filter((event) => event.workflowExecutionUpdateAcceptedEventAttributes) ?? [];
    expect(accepted).toHaveLength(2);
    expect(expectOk<{ session: Session }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}`)).session).toMatchObject({
      status: 'waiting_for_human',
      progress: { completed: 2, total: 4 },
    });
  });

  it('lets exactly one of two racing completions of the same step win, over REST and straight through Temporal', async () => {
    const session = await startWeather();
    // Two different completions racing: one wins, the other is stale.
    const results = await Promise.all([
      complete(session.sessionId, 'fetch-forecast', FORECAST),
      complete(session.sessionId, 'fetch-forecast', { ...FORECAST, severe: false }),
    ]);
    expect(results.map((r) => r.statusCode).sort(), results.map((r) => r.body).join('\n')).toEqual([200, 409]);
    // The same completion sent twice at once (a client retrying) is one completion with one answer:
    // both share the session-and-step Update id.
    const twice = await startWeather();
    const same = await Promise.all([complete(twice.sessionId, 'fetch-forecast', FORECAST), complete(twice.sessionId, 'fetch-forecast', FORECAST)]);
    expect(
      same.map((r) => r.statusCode),
      same.map((r) => r.body).join('\n'),
    ).toEqual([200, 200]);
    const twiceDetail = expectOk<{ session: { steps: { stepId: string; status: string }[]; progress: { completed: number } } }>(
      await get(`/api/v1/cookbooks/sessions/${twice.sessionId}`),
    );
    expect(twiceDetail.session.progress.completed).toBe(1);

    const handle = app.deps.temporal.client.workflow.getHandle(workflowIdFor(session.sessionId));
    const direct = await Promise.allSettled(
      [1, 2, 3].map(() => handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'draft-message', resultData: DRAFT, actor: 'key' }] })),
    );
    expect(direct.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const state = await handle.query('sessionState');
    expect(state).toMatchObject({ currentStep: 'approve-wording', progress: { completed: 2, total: 4 } });
    const detail = expectOk<{ session: { steps: { stepId: string; status: string }[] } }>(
      await get(`/api/v1/cookbooks/sessions/${session.sessionId}`),
    );
    expect(detail.session.steps.filter((s) => s.status === 'completed').map((s) => s.stepId)).toEqual(['fetch-forecast', 'draft-message']);
  });

  it('keeps the search attributes current and leaves a memo an operator can read', async () => {
    const who = await createTestAccount(app.deps.sql);
    const session = await startWeather(who);
    const handle = app.deps.temporal.client.workflow.getHandle(workflowIdFor(session.sessionId));
    const description = await handle.describe();
    expect(description.memo).toMatchObject({
      cookbookTitle: expect.stringContaining('SMS'),
      accountId: who.accountId,
      selectedApis: { weather: weatherApi, sms: smsApi },
    });
    // The account's email never goes into workflow history, which every operator can read.
    expect(JSON.stringify(description.memo)).not.toContain(who.email);
    expect(description.taskQueue).toBe(taskQueue);

    const list = async (query: string) => {
      const ids: string[] = [];
      for await (const execution of app.deps.temporal.client.workflow.list({ query })) ids.push(execution.workflowId);
      return ids;
    };
    await expect
      .poll(() => list(`AccountId = "${who.accountId}" AND CookbookId = "weather-alert-sms" AND CurrentStep = "fetch-forecast"`), {
        timeout: 10_000,
        interval: 200,
      })
      .toEqual([workflowIdFor(session.sessionId)]);
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST, who));
    expectOk(await complete(session.sessionId, 'draft-message', DRAFT, who));
    await expect
      .poll(() => list(`AccountId = "${who.accountId}" AND SessionStatus = "waiting_for_human" AND CurrentStep = "approve-wording"`), {
        timeout: 10_000,
        interval: 200,
      })
      .toEqual([workflowIdFor(session.sessionId)]);
    const count = await app.deps.temporal.client.workflow.count(`AccountId = "${who.accountId}" AND SessionStatus = "running"`);
    expect(count.count).toBe(0);
    const attributes = (await handle.describe()).typedSearchAttributes;
    expect(
      attributes
        .getAll()
        .map((pair) => [pair.key.name, pair.value])
        .filter(([name]) => ['AccountId', 'CookbookId', 'SessionStatus', 'CurrentStep'].includes(name as string))
        .sort(),
    ).toEqual([
      ['AccountId', who.accountId],
      ['CookbookId', 'weather-alert-sms'],
      ['CurrentStep', 'approve-wording'],
      ['SessionStatus', 'waiting_for_human'],
    ]);
  });

  it('fails a session whose account was deleted, telling the stream with session.failed', async () => {
    const doomed = await createTestAccount(app.deps.sql);
    const session = await startWeather(doomed);
    const stream = await openSse(baseUrl, `/api/v1/cookbooks/sessions/${session.sessionId}/events`, auth(doomed));
    await stream.waitFor(2);
    await app.deps.sql`delete from accounts where id = ${doomed.accountId}`;
    const handle = app.deps.temporal.client.workflow.getHandle(workflowIdFor(session.sessionId));
    const answer = await handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'fetch-forecast', resultData: FORECAST, actor: 'key' }] });
    expect(answer.session.status).toBe('failed');
    expect(await handle.result()).toMatchObject({ status: 'failed' });
    await stream.ended;
    expect(stream.events.at(-1)).toMatchObject({ event: 'session.failed', data: { status: 'failed', reason: expect.stringContaining('deleted') } });
    // The transition that could not be recorded still reaches the stream: no number is skipped.
    expect(stream.events.map((e) => e.event)).toEqual(['session.started', 'step.started', 'step.completed', 'step.started', 'session.failed']);
    expect(stream.events.map((e) => e.id)).toEqual(['1-0', '2-0', '3-0', '4-0', '5-0']);
  });

  it('cancels a session (documented extra): the stream ends with session.cancelled and a second cancel is 409', async () => {
    const session = await startWeather();
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    const cancelled = expectOk<{ session: Session }>(
      await app.inject({ method: 'POST', url: `/api/v1/cookbooks/sessions/${session.sessionId}/cancel`, headers: auth() }),
    );
    expect(cancelled.session).toMatchObject({ status: 'cancelled', currentStep: null, progress: { completed: 1, total: 4 } });
    expectError(
      await app.inject({ method: 'POST', url: `/api/v1/cookbooks/sessions/${session.sessionId}/cancel`, headers: auth() }),
      409,
      'conflict',
    );
    // The optional body is validated like any other.
    for (const payload of [{ reason: 5 }, { reason: 'x'.repeat(501) }, ['not', 'an', 'object']]) {
      expectError(
        await app.inject({ method: 'POST', url: `/api/v1/cookbooks/sessions/${session.sessionId}/cancel`, headers: auth(), payload }),
        400,
        'validation_failed',
      );
    }
    expectError(await complete(session.sessionId, 'draft-message', DRAFT), 409, 'conflict');
    const stream = await openSse(baseUrl, `/api/v1/cookbooks/sessions/${session.sessionId}/events`, auth());
    await stream.ended;
    expect(stream.events.at(-1)).toMatchObject({ event: 'session.cancelled', data: { status: 'cancelled', stepId: 'draft-message' } });
  });

  it('replays after Last-Event-ID (header or query), then follows live and ends after the final event', async () => {
    const session = await startWeather();
    const path = `/api/v1/cookbooks/sessions/${session.sessionId}/events`;
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    const full = await openSse(baseUrl, path, auth());
    const seen = await full.waitFor(4);
    full.close();
    expect(seen.map((e) => e.event)).toEqual(['session.started', 'step.started', 'step.completed', 'step.started']);

    const resumed = await openSse(baseUrl, path, { ...auth(), 'last-event-id': seen[1]!.id! });
    expect((await resumed.waitFor(2)).map((e) => e.id)).toEqual([seen[2]!.id, seen[3]!.id]);
    // Live: the next completion arrives on the open stream.
    expectOk(await complete(session.sessionId, 'draft-message', DRAFT));
    expect((await resumed.waitFor(5)).slice(2).map((e) => e.event)).toEqual(['step.completed', 'step.started', 'human_step.pending']);
    await humanComplete(session.sessionId, 'approve-wording', { approved: true });
    expectOk(await complete(session.sessionId, 'send-sms', { messageIds: [], skipped: true }));
    await resumed.ended;
    expect(resumed.events.at(-1)?.event).toBe('session.completed');
    expect(resumed.comments.length).toBeGreaterThan(0);

    const byQuery = await openSse(baseUrl, `${path}?lastEventId=10-0`, auth());
    await byQuery.ended;
    expect(byQuery.events.map((e) => e.id)).toEqual(['11-0', '12-0']);
    // Already holding the final event: the stream ends at once with nothing to send.
    const done = await openSse(baseUrl, path, { ...auth(), 'last-event-id': '12-0' });
    await done.ended;
    expect(done.events).toEqual([]);
    expectError(await get(`${path}?lastEventId=abc`), 400, 'validation_failed');
  });

  it('serves many streams through one shared subscriber connection and frees a closed client at once', async () => {
    const session = await startWeather();
    const path = `/api/v1/cookbooks/sessions/${session.sessionId}/events`;
    const before = app.sessionEvents.stats().followers;
    const streams = await Promise.all(Array.from({ length: 60 }, () => openSse(baseUrl, path, auth())));
    await Promise.all(streams.map((stream) => stream.waitFor(2)));
    expect(app.sessionEvents.stats()).toMatchObject({ followers: before + 60, subscriberConnections: 1 });
    const clients = (await app.deps.redis.client('LIST')) as string;
    expect(clients.split('\n').filter((line) => line.includes(`name=${redisPrefix}:sse-hub`))).toHaveLength(1);

    // Heartbeats arrive as comment lines on idle streams.
    await expect.poll(() => streams[0]!.comments.includes('heartbeat'), { timeout: 5_000, interval: 50 }).toBe(true);
    for (const stream of streams.slice(0, 59)) stream.close();
    await expect.poll(() => app.sessionEvents.stats().followers, { timeout: 5_000, interval: 20 }).toBe(before + 1);
    // The one left open still gets live events.
    expectOk(await complete(session.sessionId, 'fetch-forecast', FORECAST));
    await streams[59]!.waitFor(4);
    streams[59]!.close();
    await expect.poll(() => app.sessionEvents.stats().followers, { timeout: 5_000, interval: 20 }).toBe(before);
  });
});
