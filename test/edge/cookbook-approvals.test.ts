import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks, readCookbookFiles, type Cookbook, type CookbookStep } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { loginUser, registerUser, type BrowserSession } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

// A person's approval is a decision (approve, reject, request changes), never a checkbox left
// unticked that the session then carries on from: every shipped cookbook is driven through its
// human steps on the real workflow. What an agent reports for each agent step, and what a person
// approving sends, is written here per cookbook; a cookbook shipped without an entry fails the test.
const RESULTS: Record<string, Record<string, Record<string, unknown>>> = {
  'geocode-and-notify': {
    geocode: { points: [{ address: 'Karl Johans gate 1, Oslo', lat: 59.91, lon: 10.74 }], unmatched: [] },
    'render-map': { mapUrl: 'https://maps.example.test/m/1', markers: 1 },
    'notify-owner': { messageId: 'msg-1' },
  },
  'github-release-announcement': {
    'collect-changes': { previousTag: 'v1.2.2', pullRequests: [{ number: 7, title: 'Fix the parser' }] },
    'draft-notes': { version: 'v1.2.3', notes: 'Fixes the parser.' },
    'maintainer-signoff': { signedOff: true },
    publish: { releaseUrl: 'https://github.example.test/r/v1.2.3', announced: true },
  },
  'invoice-overdue-followup': {
    'find-overdue': { invoices: [{ invoiceId: 'in_1', customer: 'Acme', amountDueCents: 12_000, daysOverdue: 9 }] },
    'choose-actions': { decisions: [{ invoiceId: 'in_1', action: 'remind' }] },
    'send-reminders': { sent: [{ invoiceId: 'in_1', channel: 'email' }] },
  },
  'onboard-paying-customer': {
    'create-customer': { customerId: 'cus_1', email: 'buyer@example.test' },
    'create-subscription': { subscriptionId: 'sub_1', status: 'active', firstInvoiceCents: 4_900 },
    'account-review': { approved: true },
    welcome: { emailMessageId: 'em_1', teamNotified: true },
  },
  'translate-and-email': {
    'detect-language': { sourceLanguage: 'nb', characters: 420 },
    translate: { targetLanguage: 'en', translationRef: 'tr_1' },
    'review-translation': { accepted: true },
    'email-translation': { recipients: ['reader@example.test'], messageId: 'em_2' },
  },
  'weather-alert-sms': {
    'fetch-forecast': { location: { lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm' }] },
    'draft-message': { message: 'Storm tonight from 20:00.', recipients: ['+4712345678'] },
    'approve-wording': { approved: true },
    'send-sms': { messageIds: ['SM1'] },
  },
};

/** The yes/no fields a person's result must carry: the ones that say "approved". */
const approvalFields = (step: CookbookStep) => {
  const properties = (step.inputSchema.properties ?? {}) as Record<string, { type?: unknown }>;
  const required = (step.inputSchema.required ?? []) as string[];
  return required.filter((name) => properties[name]?.type === 'boolean');
};

interface Session {
  sessionId: string;
  status: string;
  currentStep: string | null;
  outcome: string | null;
}

describe('every shipped cookbook: a human step ends only by a decision', async () => {
  const cookbooks = await readCookbookFiles();
  const taskQueue = uniqueId('cookbook-approvals-');
  const redisPrefix = uniqueId('cba');
  let app: FastifyInstance;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let agentKey: string;
  let browser: BrowserSession;

  beforeAll(async () => {
    app = await createTestApp({ TEMPORAL_TASK_QUEUE: taskQueue, REDIS_PREFIX: redisPrefix });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    const user = await registerUser(app);
    agentKey = user.fullKey;
    browser = await loginUser(app, user);
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
  });

  const start = async (cookbook: Cookbook): Promise<Session> => {
    const selectedApis: Record<string, string> = {};
    for (const slot of cookbook.slots) if (slot.required) selectedApis[slot.name] = await createTestApi(app.deps.sql, slot.name);
    const res = await app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/${cookbook.id}/start`,
      headers: bearer(agentKey),
      payload: { selectedApis },
    });
    return expectOk<{ session: Session }>(res, 201).session;
  };
  const completeUrl = (session: Session) => `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`;
  const byAgent = (session: Session, stepId: string, resultData: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: completeUrl(session), headers: bearer(agentKey), payload: { stepId, resultData } });
  const byPerson = (session: Session, payload: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: completeUrl(session), headers: browser.writeHeaders, payload });
  const read = async (session: Session) =>
    expectOk<{ session: Session & { steps: { stepId: string; status: string; decision: string | null }[] } }>(
      await app.inject({ method: 'GET', url: `/api/v1/cookbooks/sessions/${session.sessionId}`, headers: bearer(agentKey) }),
    ).session;
  /** Completes the agent steps from the session's current one up to the next human step (or the end). */
  const runAgentSteps = async (cookbook: Cookbook, session: Session): Promise<Session> => {
    let current = session;
    for (;;) {
      const step = cookbook.steps.find((candidate) => candidate.stepId === current.currentStep);
      if (!step || step.kind === 'human') return current;
      current = expectOk<{ session: Session }>(await byAgent(current, step.stepId, RESULTS[cookbook.id]![step.stepId]!)).session;
    }
  };

  it('has the result an agent and a person send for every step of every shipped cookbook', () => {
    for (const cookbook of cookbooks) {
      for (const step of cookbook.steps) expect(RESULTS[cookbook.id]?.[step.stepId], `${cookbook.id}/${step.stepId}`).toBeDefined();
    }
  });

  for (const cookbook of cookbooks) {
    const humanSteps = cookbook.steps.filter((step) => step.kind === 'human');
    it(`${cookbook.id}: ${humanSteps.length === 0 ? 'has no human step: an agent runs it to the end' : humanSteps.map((step) => step.stepId).join(', ')}`, async () => {
      let session = await runAgentSteps(cookbook, await start(cookbook));
      for (const step of humanSteps) {
        expect(session).toMatchObject({ status: 'waiting_for_human', currentStep: step.stepId });
        const approval = RESULTS[cookbook.id]![step.stepId]!;
        const position = cookbook.steps.indexOf(step);

        // "Not approved" is no approval: refused before the workflow, pointing at the decisions.
        for (const field of approvalFields(step)) {
          for (const decision of [undefined, 'approve']) {
            const body = expectError(
              await byPerson(session, { stepId: step.stepId, resultData: { ...approval, [field]: false }, ...(decision ? { decision } : {}) }),
              400,
              'validation_failed',
            );
            expect(body.hint).toMatch(step.decisions?.reject ? /"reject"/ : /inputSchema/);
          }
        }
        expect(await read(session)).toMatchObject({ status: 'waiting_for_human', currentStep: step.stepId });

        if (step.decisions?.requestChanges) {
          const backTo = step.decisions.requestChanges;
          expectError(await byPerson(session, { stepId: step.stepId, resultData: {}, decision: 'request_changes' }), 400, 'validation_failed');
          const sentBack = expectOk<{ session: Session; nextStep: { stepId: string; feedback: unknown } }>(
            await byPerson(session, { stepId: step.stepId, resultData: {}, decision: 'request_changes', note: 'Shorter, please.' }),
          );
          expect(sentBack).toMatchObject({
            session: { status: 'running', currentStep: backTo },
            nextStep: { stepId: backTo, feedback: { fromStepId: step.stepId, note: 'Shorter, please.' } },
          });
          session = await runAgentSteps(cookbook, sentBack.session);
          expect(session.currentStep).toBe(step.stepId);
        } else {
          expectError(
            await byPerson(session, { stepId: step.stepId, resultData: {}, decision: 'request_changes', note: 'x' }),
            400,
            'validation_failed',
          );
        }

        if (step.decisions?.reject) {
          // Rejecting ends this session as rejected, without the later steps; a second session goes on to approve.
          const rejected = expectOk<{ session: Session; nextStep: null }>(
            await byPerson(session, { stepId: step.stepId, resultData: {}, decision: 'reject', note: 'Not this one.' }),
          );
          expect(rejected).toMatchObject({ session: { status: 'completed', currentStep: null, outcome: 'rejected' }, nextStep: null });
          const after = await read(session);
          expect(after.steps.find((row) => row.stepId === step.stepId)).toMatchObject({ status: 'completed', decision: 'reject' });
          for (const later of cookbook.steps.slice(position + 1))
            expect(after.steps.find((row) => row.stepId === later.stepId)?.status).toBe('upcoming');
          session = await runAgentSteps(cookbook, await start(cookbook));
          expect(session.currentStep).toBe(step.stepId);
        } else {
          const body = expectError(await byPerson(session, { stepId: step.stepId, resultData: {}, decision: 'reject' }), 400, 'validation_failed');
          expect(body.error).toContain('does not offer the decision "reject"');
        }

        const approved = expectOk<{ session: Session }>(await byPerson(session, { stepId: step.stepId, resultData: approval }));
        expect(approved.session.currentStep).toBe(cookbook.steps[position + 1]?.stepId ?? null);
        expect((await read(session)).steps.find((row) => row.stepId === step.stepId)).toMatchObject({ status: 'completed', decision: 'approve' });
        session = await runAgentSteps(cookbook, approved.session);
      }
      expect(session).toMatchObject({ status: 'completed', currentStep: null, outcome: null });
    });
  }
});
