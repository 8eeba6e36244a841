import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '../../db/src/cookbooks.js';
import { createRedis } from '../../db/src/redis.js';
import { completeStepUpdate, workflowIdFor } from '../../workflows/messages.js';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, openSse, startWorker, type RunningWorker } from '../helpers/cookbooks.js';
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
    app = await createTestApp({ TEMPORAL_TASK_QUEUE: taskQueue, REDIS_PREFIX: redisPrefix, SSE_HEARTBEAT_MS: '200' });
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
    app.inject({ method: 'POST', url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`, headers: auth(who), payload: { stepId, resultData } as object });
  const get = (url: string, who: TestAccount = account) => app.inject({ method: 'GET', url, headers: auth(who) });
  const humanComplete = (sessionId: string, stepId: string, resultData: Record<string, unknown>) =>
    app.deps.temporal.client.workflow.getHandle(workflowIdFor(sessionId)).executeUpdate(completeStepUpdate, { args: [{ stepId, resultData, actor: 'human' }] });

  it('runs a whole session: agent steps, a pending human step, completion, with every event in order on the stream', async () => {
    const session = await startWeather();
    expect(session).toMatchObject({ cookbookId: 'weather-alert-sms', status: 'running', currentStep: 'fetch-forecast', progress: { completed: 0, total: 4 } });
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
    expect(pending.humanSteps[0]).toMatchObject({ sessionId: session.sessionId, stepId: 'approve-wording', cookbookTitle: expect.stringContaining('SMS') });
    const inbox = expectOk<{ humanSteps: { sessionId: string; cookbookId: string }[] }>(await get('/api/v1/me/human-steps'));
    expect(inbox.humanSteps.filter((h) => h.sessionId === session.sessionId)).toEqual([expect.objectContaining({ cookbookId: 'weather-alert-sms' })]);

    // A person approves (the dashboard's cookie session sends actor 'human'; here through Temporal).
    const approved = await humanComplete(session.sessionId, 'approve-wording', { approved: true });
    expect(approved.session).toMatchObject({ status: 'running', currentStep: 'send-sms' });
    expect(expectOk<{ humanSteps: unknown[] }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}/human-steps`)).humanSteps).toEqual([]);

    const last = expectOk<{ session: Session; nextStep: null }>(await complete(session.sessionId, 'send-sms', { messageIds: ['SM1'] }));
    expect(last.session).toMatchObject({ status: 'completed', currentStep: null, progress: { completed: 4, total: 4 } });
    expect(last.nextStep).toBeNull();

    await stream.ended;
    expect(stream.events.map((e) => `${e.event}${(e.data as { stepId?: string }).stepId ? `:${(e.data as { stepId: string }).stepId}` : ''}`)).toEqual([
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

    const detail = expectOk<{ session: Session & { steps: (Step & { resultData: unknown })[] } }>(await get(`/api/v1/cookbooks/sessions/${session.sessionId}`));
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
});
