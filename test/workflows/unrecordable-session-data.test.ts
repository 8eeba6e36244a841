import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks, readCookbookFiles } from '#db/cookbooks';
import { sessionEventsKey, stepPlans } from '#core/cookbooks';
import { createRedis } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import { createActivities, nonRetryableFailure } from '#workers/temporal/activities';
import {
  ACTIVITY_FAILURES,
  completeStepUpdate,
  workflowIdFor,
  type CookbookSessionInput,
  type SessionChange,
  type SessionSnapshot,
} from '#workflows/messages';
import { createTestAccount } from '../helpers/app.js';
import { quietTemporalRuntime, startTimeSkippingServer, workflowBundle } from '../helpers/cookbooks.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';

// Data Postgres refuses (jsonb takes neither \u0000 nor a lone UTF-16 surrogate) is refused the same
// way on every attempt: the activity must fail at once, not retry every 15 s for ever, and the
// session must end as failed, saying why, instead of standing still.
const REFUSED = { nul: 'Storm\u0000warning', 'lone surrogate': 'Storm \ud83d warning' };

describe('session data the database refuses', () => {
  const taskQueue = uniqueId('cookbook-unrecordable-');
  const redisPrefix = uniqueId('cbunrec');
  let env: TestWorkflowEnvironment;
  let sql: Sql;
  let redis: Redis;
  let accountId: string;

  beforeAll(async () => {
    quietTemporalRuntime();
    env = await startTimeSkippingServer();
    await env.connection.operatorService.addSearchAttributes({
      namespace: 'default',
      searchAttributes: { AccountId: 2, CookbookId: 2, SessionStatus: 2, CurrentStep: 2 },
    });
    sql = createSql(testDatabaseUrl(), { max: 4 });
    redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    await loadCookbooks(sql);
    accountId = (await createTestAccount(sql)).accountId;
  });
  afterAll(async () => {
    await env?.teardown();
    await sql?.end({ timeout: 5 });
    await redis?.quit();
  });

  const events = async (sessionId: string) =>
    ((await redis.xrange(sessionEventsKey(redisPrefix, sessionId), '-', '+')) as [string, string[]][]).map(([id, fields]) => ({
      id,
      name: fields[1],
      data: JSON.parse(fields[3] ?? '{}') as Record<string, unknown>,
    }));

  /** A transition completing the first step with `resultData`, as the workflow sends it. */
  const completion = (sessionId: string, resultData: Record<string, unknown>): SessionChange => {
    const now = new Date().toISOString();
    return {
      input: { sessionId, accountId, cookbookId: 'weather-alert-sms', selectedApis: {}, idempotencyKey: null },
      session: {
        sessionId,
        cookbookId: 'weather-alert-sms',
        status: 'running',
        currentStep: 'draft-message',
        progress: { completed: 1, total: 4 },
        startedAt: now,
        updatedAt: now,
        version: 2,
      },
      endedAt: null,
      steps: [
        {
          stepId: 'fetch-forecast',
          position: 0,
          kind: 'agent',
          status: 'completed',
          resultData,
          completedBy: 'key',
          startedAt: now,
          remindAt: null,
          expiresAt: now,
          reminders: 0,
          completedAt: now,
        },
      ],
      events: [{ seq: 1, name: 'step.completed', data: { sessionId, stepId: 'fetch-forecast' } }],
      eventsOnly: false,
    };
  };

  for (const [what, text] of Object.entries(REFUSED)) {
    it(`fails the activity at once, not retryable, when a step's data holds a ${what}`, async () => {
      const activities = createActivities({ sql, redis, redisPrefix });
      const sessionId = uniqueId('ses_');
      const error = await activities.recordSessionChange(completion(sessionId, { alerts: [{ title: text }] })).then(
        () => null,
        (thrown: unknown) => thrown,
      );
      expect(error, String(error)).toBeInstanceOf(ApplicationFailure);
      expect(error).toMatchObject({ type: ACTIVITY_FAILURES.unrecordable, nonRetryable: true });
      // The reason names the SQLSTATE (a data exception, class 22) and never echoes the data.
      expect((error as Error).message).toMatch(/SQLSTATE 22[0-9A-Z]{3}/);
      expect((error as Error).message).not.toContain('Storm');
      // Nothing of the refused transition reached the stream.
      expect(await events(sessionId)).toEqual([]);
    });
  }

  it('classifies what a retry can fix apart from what it cannot', () => {
    const pgError = (code: string) => Object.assign(new Error(`postgres ${code}`), { code });
    expect(nonRetryableFailure(pgError('22021'), 's')).toMatchObject({ type: ACTIVITY_FAILURES.unrecordable, nonRetryable: true });
    expect(nonRetryableFailure(pgError('22P02'), 's')).toMatchObject({ type: ACTIVITY_FAILURES.unrecordable });
    expect(nonRetryableFailure(pgError('23505'), 's')).toMatchObject({ type: ACTIVITY_FAILURES.unrecordable });
    expect(nonRetryableFailure(pgError('23503'), 's')).toMatchObject({ type: ACTIVITY_FAILURES.orphaned, nonRetryable: true });
    // Postgres or Redis away, a serialization failure or deadlock, a lock timeout: a retry may help.
    for (const code of ['ECONNREFUSED', '40001', '40P01', '55P03', '57P01', '08006'])
      expect(nonRetryableFailure(pgError(code), 's'), code).toBeNull();
    expect(nonRetryableFailure(new Error('socket closed'), 's')).toBeNull();
  });

  it('ends the session as failed, with a session.failed event naming the step, when a completion cannot be stored', async () => {
    const cookbook = (await readCookbookFiles()).find((book) => book.id === 'weather-alert-sms')!;
    const plan: CookbookSessionInput = {
      sessionId: uniqueId('ses_'),
      accountId,
      cookbookId: cookbook.id,
      cookbookTitle: cookbook.title,
      selectedApis: { weather: 'w', sms: 's' },
      idempotencyKey: null,
      steps: stepPlans(cookbook),
    };
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: createActivities({ sql, redis, redisPrefix }),
    });
    const { answer, final } = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start('cookbookSession', { workflowId: workflowIdFor(plan.sessionId), taskQueue, args: [plan] });
      const resultData = { location: { lat: 1, lon: 2 }, severe: true, alerts: [{ title: REFUSED.nul }] };
      const answer = await handle.executeUpdate(completeStepUpdate, { args: [{ stepId: 'fetch-forecast', resultData, actor: 'key' }] });
      return { answer, final: (await handle.result()) as SessionSnapshot };
    });
    expect(answer.session).toMatchObject({ status: 'failed', currentStep: null });
    expect(final).toMatchObject({ status: 'failed', currentStep: null, progress: { completed: 0, total: 4 } });

    // The stream: what was recorded, then the failure; the transition that could not be stored is not there.
    const stream = await events(plan.sessionId);
    expect(stream.map((event) => event.name)).toEqual(['session.started', 'step.started', 'session.failed']);
    expect(stream.map((event) => event.id)).toEqual(['1-0', '2-0', '3-0']);
    expect(stream.at(-1)!.data).toMatchObject({ status: 'failed', stepId: 'fetch-forecast', reason: expect.stringMatching(/SQLSTATE 22/) });

    // The mirror says the session ended; it does not stay "running" for ever.
    const [session] = await sql<{ status: string; ended_at: Date | null; current_step_id: string | null }[]>`
      select status, ended_at, current_step_id from cookbook_sessions where id = ${plan.sessionId}`;
    expect(session).toMatchObject({ status: 'failed', ended_at: expect.any(Date), current_step_id: null });
    const [step] = await sql<{ status: string; result_data: unknown }[]>`
      select status, result_data from cookbook_session_steps where session_id = ${plan.sessionId} and step_id = 'fetch-forecast'`;
    expect(step).toMatchObject({ status: 'pending', result_data: null });
  });
});
