import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { sessionEventsKey } from '#core/cookbooks';
import { createRedis } from '#core/platform';
import { completeStepUpdate, workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, openSse, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

const FORECAST = { location: { lat: 1, lon: 2 }, severe: false, alerts: [] };
const DRAFT = { message: 'All clear.', recipients: ['+4712345678'] };

describe('a cookbook session survives its Temporal worker being stopped and replaced', () => {
  const taskQueue = uniqueId('cookbook-durability-');
  const redisPrefix = uniqueId('cbdur');
  let app: FastifyInstance;
  let baseUrl: string;
  let workerRedis: Redis;
  let worker: RunningWorker | null = null;
  let account: TestAccount;
  let selectedApis: Record<string, string>;

  beforeAll(async () => {
    app = await createTestApp({ TEMPORAL_TASK_QUEUE: taskQueue, REDIS_PREFIX: redisPrefix, SSE_HEARTBEAT_MS: '250' });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(app.deps.sql);
    selectedApis = { weather: await createTestApi(app.deps.sql, 'weather'), sms: await createTestApi(app.deps.sql, 'sms') };
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
  });

  const complete = (sessionId: string, stepId: string, resultData: unknown) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`,
      headers: bearer(account.fullKey),
      payload: { stepId, resultData } as object,
    });

  it('continues every session where it stood, with no event lost or repeated', async () => {
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    const start = (idempotencyKey: string) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: { ...bearer(account.fullKey), 'idempotency-key': idempotencyKey },
        payload: { selectedApis },
      });
    const [a, b] = await Promise.all([start(uniqueId('a-')), start(uniqueId('b-'))]).then((res) =>
      res.map((r) => expectOk<{ session: { sessionId: string } }>(r, 201).session.sessionId),
    );
    const stream = await openSse(baseUrl, `/api/v1/cookbooks/sessions/${a}/events`, bearer(account.fullKey));
    expectOk(await complete(a!, 'fetch-forecast', FORECAST));
    expectOk(await complete(b!, 'fetch-forecast', FORECAST));
    expectOk(await complete(b!, 'draft-message', DRAFT));
    await stream.waitFor(4);

    // The worker goes away mid-session.
    await worker.stop();
    worker = null;

    // Work sent while no worker runs waits in Temporal, then is applied by the new worker.
    const whileDown = complete(a!, 'draft-message', DRAFT);
    const session = await app.inject({ method: 'GET', url: `/api/v1/cookbooks/sessions/${a}`, headers: bearer(account.fullKey) });
    expect(expectOk<{ session: { currentStep: string } }>(session).session.currentStep).toBe('draft-message');

    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    const applied = expectOk<{ session: { status: string; currentStep: string } }>(await whileDown);
    expect(applied.session).toMatchObject({ status: 'waiting_for_human', currentStep: 'approve-wording' });

    for (const sessionId of [a!, b!]) {
      const handle = app.deps.temporal.client.workflow.getHandle(workflowIdFor(sessionId));
      await handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'approve-wording', resultData: { approved: true }, actor: 'human' }] });
      expectOk(await complete(sessionId, 'send-sms', { messageIds: ['m1'] }));
      expect(await handle.result()).toMatchObject({ status: 'completed', progress: { completed: 4, total: 4 } });
    }

    await stream.ended;
    const expected = [
      'session.started',
      'step.started',
      'step.completed',
      'step.started',
      'step.completed',
      'step.started',
      'human_step.pending',
      'step.completed',
      'human_step.completed',
      'step.started',
      'step.completed',
      'session.completed',
    ];
    expect(stream.events.map((e) => e.event)).toEqual(expected);
    expect(stream.events.map((e) => e.id)).toEqual(expected.map((_, i) => `${i + 1}-0`));
    for (const sessionId of [a!, b!]) {
      const entries = (await app.deps.redis.xrange(sessionEventsKey(redisPrefix, sessionId), '-', '+')) as [string, string[]][];
      expect(entries.map(([, fields]) => fields[1])).toEqual(expected);
      const [row] = await app.deps.sql<
        { status: string; completed_steps: number }[]
      >`select status, completed_steps from cookbook_sessions where id = ${sessionId}`;
      expect(row).toMatchObject({ status: 'completed', completed_steps: 4 });
    }
  });

  it('appends an event only once when an activity runs again for the same transition', async () => {
    // What a retried activity or a replacement worker does: record the same transition twice.
    const { createActivities } = await import('#workers/temporal/activities');
    const activities = createActivities({ sql: app.deps.sql, redis: workerRedis, redisPrefix });
    const sessionId = uniqueId('ses_');
    const change = {
      input: { sessionId, accountId: account.accountId, cookbookId: 'weather-alert-sms', selectedApis, idempotencyKey: null },
      session: {
        sessionId,
        cookbookId: 'weather-alert-sms',
        status: 'running' as const,
        currentStep: 'fetch-forecast',
        progress: { completed: 0, total: 4 },
        startedAt: new Date().toISOString(),
        updatedAt: new Date().toISOString(),
        version: 1,
      },
      endedAt: null,
      steps: [],
      events: [
        { seq: 1, name: 'session.started' as const, data: { sessionId } },
        { seq: 2, name: 'step.started' as const, data: { sessionId, stepId: 'fetch-forecast' } },
      ],
      eventsOnly: false,
    };
    await activities.recordSessionChange(change);
    await activities.recordSessionChange(change);
    // A stale, older transition arriving late changes nothing either.
    await activities.recordSessionChange({ ...change, session: { ...change.session, status: 'completed', version: 0 }, events: [change.events[0]!] });
    const entries = (await app.deps.redis.xrange(sessionEventsKey(redisPrefix, sessionId), '-', '+')) as [string, string[]][];
    expect(entries.map(([id, fields]) => `${id} ${fields[1]}`)).toEqual(['1-0 session.started', '2-0 step.started']);
    const [row] = await app.deps.sql<{ status: string; version: number }[]>`select status, version from cookbook_sessions where id = ${sessionId}`;
    expect(row).toMatchObject({ status: 'running', version: 1 });
  });
});
