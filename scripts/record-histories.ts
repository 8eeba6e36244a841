// `npm run record:histories`: records cookbook-session workflow histories for the replay test
// (test/workflows/replay.test.ts) into test/fixtures/histories/<date>/.
//
// Each scenario is a real session: the production workflow code and activities (Postgres mirror,
// Redis event stream), started with the same options as the edge (sessionWorkflowOptions), its
// steps completed with the edge's Update ids, its payloads encrypted by the platform's codec (with
// the public development key, so the replay test can read them). Temporal's time-skipping test
// server runs it, so reminders and expiries that take days take seconds.
//
// Recordings are never replaced: a workflow change that breaks an old recording would break the
// sessions of that age still open in production. Record a new dated set when the workflow changes
// (for example after a patched() change), and keep the old ones until no session of theirs can be open.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { completionUpdateId, sessionWorkflowOptions, stepPlans } from '#core/cookbooks';
import { createRedis, DEV_CODEC_KEYS, parseCodecKeys, parseSettings, sharedSettings, temporalDataConverter } from '#core/platform';
import { readCookbookFiles, loadCookbooks } from '#db/cookbooks';
import { createSql } from '#db/sql';
import { createTestAccount } from '#fixtures/accounts';
import { uniqueId } from '#fixtures/ids';
import { createTestApi, quietTemporalRuntime, workflowBundle } from '#fixtures/temporal';
import { createActivities } from '#workers/temporal/activities';
import { historyFileText } from '#fixtures/histories';
import { completeStepUpdate, cancelSessionUpdate, type Actor, type CookbookSessionInput } from '#workflows/messages';

const HOUR = 3_600_000;
const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true, REDIS_URL: true }));
const testServer = process.env.TEMPORAL_TEST_SERVER_PATH;
if (!testServer) throw new Error('TEMPORAL_TEST_SERVER_PATH is not set: run it as npm run record:histories');
// A new folder per recording run: an earlier set of the same day is never overwritten.
const day = new Date().toISOString().slice(0, 10);
const historiesDir = fileURLToPath(new URL('../test/fixtures/histories', import.meta.url));
let outDir = join(historiesDir, day);
for (let run = 2; existsSync(outDir); run += 1) outDir = join(historiesDir, `${day}-${run}`);
const taskQueue = uniqueId('record-histories-');
const redisPrefix = uniqueId('record');
const dataConverter = temporalDataConverter(parseCodecKeys(DEV_CODEC_KEYS));

quietTemporalRuntime();
const env = await TestWorkflowEnvironment.createTimeSkipping({
  server: { executable: { type: 'existing-path', path: testServer } },
  client: { dataConverter },
});
await env.connection.operatorService.addSearchAttributes({
  namespace: 'default',
  searchAttributes: { AccountId: 2, CookbookId: 2, SessionStatus: 2, CurrentStep: 2 },
});
const sql = createSql(settings.DATABASE_URL, { max: 4, appName: 'record-histories' });
const redis = createRedis(settings.REDIS_URL, 'queue');
await loadCookbooks(sql);
const cookbook = (await readCookbookFiles()).find((book) => book.id === 'weather-alert-sms')!;
const account = await createTestAccount(sql);
const selectedApis = { weather: await createTestApi(sql, 'weather'), sms: await createTestApi(sql, 'sms') };

const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue,
  workflowBundle: await workflowBundle(),
  activities: createActivities({ sql, redis, redisPrefix }),
  dataConverter,
});

const start = async (accountId = account.accountId) => {
  const input: CookbookSessionInput = {
    sessionId: `ses_${randomBytes(12).toString('hex')}`,
    accountId,
    cookbookId: cookbook.id,
    cookbookTitle: cookbook.title,
    selectedApis,
    idempotencyKey: null,
    steps: stepPlans(cookbook),
  };
  return env.client.workflow.start('cookbookSession', sessionWorkflowOptions(input, taskQueue));
};
const complete = (
  handle: WorkflowHandle,
  sessionId: string,
  stepId: string,
  resultData: Record<string, unknown>,
  actor: Actor = 'key',
  decided: { decision?: 'reject' | 'request_changes'; note?: string } = {},
) => {
  // Who completed it, as the edge names them: the account's key, or its owner signed in.
  const completer = actor === 'key' ? { keyId: account.keyId } : { personId: account.accountId };
  const request = { stepId, resultData, actor, completer, ...decided };
  return handle.executeUpdate(completeStepUpdate, { args: [request], updateId: completionUpdateId(sessionId, request) });
};
const sessionIdOf = (handle: WorkflowHandle) => handle.workflowId.replace(/^cookbook-session-/, '');
const agentSteps = async (handle: WorkflowHandle) => {
  const id = sessionIdOf(handle);
  await complete(handle, id, 'fetch-forecast', {
    location: { name: 'Oslo', lat: 59.91, lon: 10.75 },
    severe: true,
    alerts: [{ title: 'Storm', severity: 'severe' }],
  });
  await complete(handle, id, 'draft-message', { message: 'Storm tonight from 20:00.', recipients: ['+4712345678'] });
};

/** Each scenario drives one session to its end (or to where it waits) and returns its handle. */
const scenarios: Record<string, () => Promise<WorkflowHandle>> = {
  // Every step kind: two agent steps, a person's approval, the last agent step.
  'completed-agent-and-human': async () => {
    const handle = await start();
    await agentSteps(handle);
    await complete(handle, sessionIdOf(handle), 'approve-wording', { approved: true }, 'human');
    await complete(handle, sessionIdOf(handle), 'send-sms', { messageIds: ['SM1'] });
    await handle.result();
    return handle;
  },
  // A human step that waited past its reminder (2 h in this cookbook) before the person answered.
  'reminded-then-completed': async () => {
    const handle = await start();
    await agentSteps(handle);
    await env.sleep(3 * HOUR);
    await complete(handle, sessionIdOf(handle), 'approve-wording', { approved: true, note: 'late, sorry' }, 'human');
    await complete(handle, sessionIdOf(handle), 'send-sms', { messageIds: ['SM2'] });
    await handle.result();
    return handle;
  },
  // Nobody answered: reminders every 2 h, expiry at 12 h.
  'expired-human-step': async () => {
    const handle = await start();
    await agentSteps(handle);
    await handle.result();
    return handle;
  },
  // Cancelled by the agent while the human step waited.
  'cancelled-waiting-for-human': async () => {
    const handle = await start();
    await agentSteps(handle);
    await handle.executeUpdate(cancelSessionUpdate, { args: [{ reason: 'no longer needed' }] });
    await handle.result();
    return handle;
  },
  // The account is gone: the first record fails for good and the session ends as failed.
  'failed-account-gone': async () => {
    const handle = await start('00000000-0000-4000-8000-000000000000');
    await handle.result();
    return handle;
  },
  // A person rejected the wording: the session ends completed, outcome rejected, nothing sent.
  'rejected-by-person': async () => {
    const handle = await start();
    await agentSteps(handle);
    await complete(handle, sessionIdOf(handle), 'approve-wording', {}, 'human', { decision: 'reject', note: 'Too alarming.' });
    await handle.result();
    return handle;
  },
  // A person sent it back to the drafting step with a note; the redraft was approved and sent.
  'changes-requested-then-completed': async () => {
    const handle = await start();
    await agentSteps(handle);
    const id = sessionIdOf(handle);
    await complete(handle, id, 'approve-wording', {}, 'human', { decision: 'request_changes', note: 'Say when it starts.' });
    await complete(handle, id, 'draft-message', { message: 'Storm from 20:00 tonight.', recipients: ['+4712345678'] });
    await complete(handle, id, 'approve-wording', { approved: true }, 'human');
    await complete(handle, id, 'send-sms', { messageIds: ['SM3'] });
    await handle.result();
    return handle;
  },
  // Postgres refused a completion's data (a \u0000 in jsonb): the session ended as failed at once,
  // behind patched('record-session-failures'), instead of retrying for ever.
  'failed-data-refused': async () => {
    const handle = await start();
    const id = sessionIdOf(handle);
    await complete(handle, id, 'fetch-forecast', { location: { name: 'Oslo\u0000', lat: 59.91, lon: 10.75 }, severe: true, alerts: [] });
    await handle.result();
    return handle;
  },
  // Still waiting on a person when recorded: the case the versioning rules protect most.
  'open-waiting-for-human': async () => {
    const handle = await start();
    await agentSteps(handle);
    await env.sleep(5 * HOUR);
    return handle;
  },
};

mkdirSync(outDir, { recursive: true });
try {
  await worker.runUntil(async () => {
    for (const [name, run] of Object.entries(scenarios)) {
      const handle = await run();
      const history = await handle.fetchHistory();
      const file = join(outDir, `${name}.json`);
      writeFileSync(file, historyFileText(handle.workflowId, history));
      console.log(`[record-histories] ${name}: ${history.events?.length ?? 0} events -> ${file}`);
      if (name === 'open-waiting-for-human') await handle.terminate('recorded');
    }
  });
} finally {
  await env.teardown();
  await sql.end({ timeout: 5 });
  await redis.quit();
}
