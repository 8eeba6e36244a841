import { isDeepStrictEqual } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { ServiceError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/common';
import type { ValidateFunction } from 'ajv';
import {
  countActiveSessions,
  findSession,
  findSessionByIdempotencyKey,
  findSessionWithCookbookVersion,
  insertStartedSession,
  listPendingHumanSteps,
  listSessionSteps,
  type PendingHumanStepRow,
  type SessionRow,
  type StepRow,
} from '#db/cookbook-sessions';
import { createStepSchemaAjv, parseDuration, renderInstructions, type Cookbook, type CookbookStep } from '#db/cookbooks';
import { notFound, PlatformError } from '#core/platform';
import type { Db, Sql } from '#db/sql';
import {
  cancelSessionUpdate,
  completeStepUpdate,
  decisionRefusal,
  ENDED_STATUSES,
  REJECTIONS,
  SEARCH_ATTRIBUTES,
  workflowIdFor,
  type Actor,
  type CompleteStepRequest,
  type CompleteStepResult,
  type Decision,
  type CookbookSessionInput,
  type SessionSnapshot,
  type StepPlan,
  type StepRecord,
} from '#workflows/messages';
import type { TemporalGateway } from '#core/platform';
import type { HumanStepView, SessionView, StepView } from '#contracts/cookbooks';
import type { Callability } from '#contracts/directory';
import type { CookbookCache } from './cookbook-cache.js';

export function sessionView(row: SessionRow): SessionView {
  return {
    sessionId: row.id,
    cookbookId: row.cookbook_id,
    status: row.status,
    currentStep: row.current_step_id,
    progress: { completed: row.completed_steps, total: row.total_steps },
    selectedApis: row.selected_apis,
    startedAt: row.started_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    endedAt: row.ended_at?.toISOString() ?? null,
    outcome: row.outcome ?? null,
  };
}

/**
 * A step of a session's cookbook with what the history says about it. The current step counts as
 * pending even before the workflow's first write of its history row lands. A step the session has
 * not reached shows its outline only (id, title, kind, time limits): its instructions and
 * inputSchema are the cookbook's paid details (GET /cookbooks/{id}), which a free session must not
 * hand out ahead of time (docs/decisions/session-view-hides-future-steps.md).
 */
export function stepView(cookbook: Cookbook, session: SessionRow, stepId: string, history: StepRow | undefined): StepView | null {
  const selectedApis = session.selected_apis;
  const position = cookbook.steps.findIndex((step) => step.stepId === stepId);
  const step = cookbook.steps[position];
  if (!step) return null;
  const reached = history !== undefined || session.current_step_id === stepId;
  return {
    stepId: step.stepId,
    title: step.title,
    kind: step.kind,
    position,
    instructions: reached ? renderInstructions(step.instructions, selectedApis) : null,
    inputSchema: reached ? step.inputSchema : null,
    timeLimits: step.timeLimits,
    completedBy: step.kind === 'human' ? 'human' : 'key',
    completedByName: history?.completer_name ?? null,
    status: history?.status ?? (session.current_step_id === stepId && !isEnded(session) ? 'pending' : 'upcoming'),
    startedAt: history?.started_at.toISOString() ?? null,
    remindAt: history?.remind_at?.toISOString() ?? null,
    expiresAt: history?.expires_at?.toISOString() ?? null,
    completedAt: history?.completed_at?.toISOString() ?? null,
    resultData: history?.result_data ?? null,
    decision: history?.decision ?? null,
    note: history?.note ?? null,
    feedback: history?.feedback ?? null,
  };
}

export function humanStepView(row: PendingHumanStepRow): HumanStepView {
  const step = row.steps.find((candidate) => candidate.stepId === row.step_id);
  const results = row.prior_results ?? {};
  const context = (step?.context ?? []).map((entry) => {
    const result = results[entry.from] ?? {};
    const names = entry.fields ?? Object.keys(result);
    return {
      stepId: entry.from,
      title: row.steps.find((candidate) => candidate.stepId === entry.from)?.title ?? entry.from,
      fields: names.map((name) => ({ name, value: result[name] ?? null })),
    };
  });
  return {
    sessionId: row.session_id,
    cookbookId: row.cookbook_id,
    cookbookTitle: row.cookbook_title,
    stepId: row.step_id,
    title: step?.title ?? row.step_id,
    instructions: renderInstructions(step?.instructions ?? '', row.selected_apis),
    context,
    decisions: {
      reject: step?.decisions?.reject === true,
      requestChanges: step?.decisions?.requestChanges
        ? {
            backTo: step.decisions.requestChanges,
            title: row.steps.find((candidate) => candidate.stepId === step.decisions!.requestChanges)?.title ?? step.decisions.requestChanges,
          }
        : null,
    },
    inputSchema: step?.inputSchema ?? {},
    changesRequested: row.changes_requested
      ? {
          note: row.changes_requested.note,
          stepId: row.changes_requested.step_id,
          title: row.steps.find((candidate) => candidate.stepId === row.changes_requested!.step_id)?.title ?? row.changes_requested.step_id,
        }
      : null,
    pendingSince: row.started_at.toISOString(),
    remindAt: row.remind_at?.toISOString() ?? null,
    expiresAt: row.expires_at?.toISOString() ?? null,
    reminders: row.reminders,
    assignee: row.assignee_id && row.assignee_email ? { id: row.assignee_id, email: row.assignee_email } : null,
  };
}

export const isEnded = (row: SessionRow) => ENDED_STATUSES.includes(row.status);

/**
 * The agent key whose sessions alone a caller may see, or null for every session of its account (its
 * API keys, its dashboard). See docs/decisions/agent-keys-see-their-own-sessions.md.
 */
export const agentKeyScope = (caller: { keyKind: 'api' | 'agent' | null; keyId: string | null }): string | null =>
  caller.keyKind === 'agent' ? caller.keyId : null;

/**
 * Loads the caller's session; another account's session (or, for an agent key, a session another
 * key started) is indistinguishable from a missing one.
 */
export async function requireSession(db: Db, accountId: string, sessionId: string, agentKeyId: string | null = null): Promise<SessionRow> {
  const row = await findSession(db, accountId, sessionId, agentKeyId);
  if (!row) throw notFound(`Session ${sessionId}`, 'List your active sessions with GET /api/v1/cookbooks/sessions.');
  return row;
}

/**
 * The caller's session and its cookbook, in one Postgres round trip while the cookbook's cached
 * definition is current (two when it is not).
 */
export async function requireSessionAndCookbook(
  db: Db,
  cookbooks: CookbookCache,
  accountId: string,
  sessionId: string,
  agentKeyId: string | null = null,
): Promise<{ row: SessionRow; cookbook: Cookbook }> {
  const found = await findSessionWithCookbookVersion(db, accountId, sessionId, agentKeyId);
  if (!found) throw notFound(`Session ${sessionId}`, 'List your active sessions with GET /api/v1/cookbooks/sessions.');
  const { cookbook_version: version, ...row } = found;
  const cookbook = await cookbooks.get(row.cookbook_id, version);
  if (!cookbook) throw notFound(`Cookbook ${row.cookbook_id}`, 'List cookbooks with GET /api/v1/cookbooks.');
  return { row, cookbook };
}

/**
 * Checks `selectedApis` against the cookbook's slots, the directory and, given `states` (each chosen
 * API's state for the caller), that the caller can call each now; names the first bad slot.
 */
export async function checkSelectedApis(
  db: Db,
  cookbook: Cookbook,
  selectedApis: Record<string, string>,
  states?: ReadonlyMap<string, Callability>,
): Promise<void> {
  const slotNames = new Set(cookbook.slots.map((slot) => slot.name));
  const unknown = Object.keys(selectedApis).filter((name) => !slotNames.has(name));
  if (unknown.length > 0) {
    throw new PlatformError('validation_failed', `Unknown slot ${unknown.map((name) => `"${name}"`).join(', ')} in selectedApis`, {
      hint: `This cookbook's slots are: ${cookbook.slots.map((slot) => slot.name).join(', ')}.`,
    });
  }
  for (const slot of cookbook.slots) {
    if (slot.required && !selectedApis[slot.name]) {
      throw new PlatformError('validation_failed', `Slot "${slot.name}" is required: choose an API for it in selectedApis`, {
        hint: `Slot "${slot.name}" needs ${slot.category} API (${slot.description}). Find one with GET /api/v1/discover?q=${encodeURIComponent(slot.category)}.`,
      });
    }
  }
  const ids = [...new Set(Object.values(selectedApis))];
  const rows = ids.length === 0 ? [] : await db<{ id: string }[]>`select id from apis where id = any(${ids})`;
  const known = new Set(rows.map((row) => row.id));
  for (const [slot, apiId] of Object.entries(selectedApis)) {
    if (!known.has(apiId)) {
      throw new PlatformError('validation_failed', `Slot "${slot}": API "${apiId}" is not in the directory`, {
        hint: 'Use an API id from GET /api/v1/apis or GET /api/v1/discover.',
      });
    }
  }
  if (!states) return;
  for (const [slot, apiId] of Object.entries(selectedApis)) {
    const state = states.get(apiId);
    if (state && state.state !== 'ready') throw notCallable(cookbook, slot, apiId, state);
  }
}

const STATE_WORDS: Record<Exclude<Callability['state'], 'ready'>, string> = {
  needs_key: 'needs your own key first',
  needs_oauth: 'needs an OAuth connection first',
  unavailable: 'cannot be called through the platform for you',
};

/** A slot filled with an API the caller cannot call now: what it needs, or another choice. */
function notCallable(cookbook: Cookbook, slot: string, apiId: string, state: Callability): PlatformError {
  const what = STATE_WORDS[state.state as Exclude<Callability['state'], 'ready'>];
  return new PlatformError('api_not_callable', `Slot "${slot}": ${apiId} ${what} (${state.state}, ${state.reason})`, {
    hint: `${state.hint ?? ''} Or choose an API you can call now: GET /api/v1/cookbooks/${cookbook.id} lists each slot's suggestions, callable ones first, and GET /api/v1/apis?callable=true lists every API you can call.`.trim(),
    details: { slot, apiId, callability: state },
    tool: {
      hint: `${state.state === 'unavailable' ? '' : `A person connects it in the dashboard (Connections); ask for it with request_connection (apiId: "${apiId}", purpose: what you want to do and why). `}Or choose an API you can call now: get_cookbook (id: "${cookbook.id}") lists each slot's suggestions, callable ones first, and search_apis (callable: true) lists every API you can call.`,
    },
  });
}

const STATE_ORDER: Record<Callability['state'], number> = { ready: 0, needs_key: 1, needs_oauth: 1, unavailable: 2 };

/**
 * The cookbook's slots as a caller sees them: each slot's suggestions that are directory APIs with
 * their state for the caller, callable ones first (the cookbook's order otherwise), and
 * suggestedProviders in that order too (names that are no API id last).
 */
export function slotViews(cookbook: Cookbook, states: ReadonlyMap<string, Callability>) {
  return cookbook.slots.map((slot) => {
    const rank = (id: string) => {
      const state = states.get(id);
      return state ? STATE_ORDER[state.state] : 3;
    };
    const ordered = slot.suggestedProviders
      .map((id, at) => ({ id, at }))
      .sort((a, b) => rank(a.id) - rank(b.id) || a.at - b.at)
      .map((s) => s.id);
    return {
      ...slot,
      suggestedProviders: ordered,
      suggestions: ordered.flatMap((apiId) => {
        const callability = states.get(apiId);
        return callability ? [{ apiId, callability }] : [];
      }),
    };
  });
}

/** The workflow's plan of a cookbook step (the durations parsed to milliseconds). */
export function stepPlan(step: CookbookStep): StepPlan {
  return {
    stepId: step.stepId,
    title: step.title,
    kind: step.kind,
    reminderAfterMs: step.timeLimits.reminderAfter ? parseDuration(step.timeLimits.reminderAfter) : null,
    expiresAfterMs: parseDuration(step.timeLimits.expiresAfter)!,
    ...(step.decisions
      ? {
          decisions: {
            ...(step.decisions.reject ? { reject: true } : {}),
            ...(step.decisions.requestChanges ? { requestChangesBackTo: step.decisions.requestChanges } : {}),
          },
        }
      : {}),
  };
}

/** The workflow's plan of a cookbook's steps. */
export const stepPlans = (cookbook: Cookbook): StepPlan[] => cookbook.steps.map(stepPlan);

const UNAVAILABLE_CODES = new Set([4, 8, 14]); // DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNAVAILABLE

function isTemporalUnavailable(error: unknown): boolean {
  if (!(error instanceof ServiceError)) return false;
  const code = (error.cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && UNAVAILABLE_CODES.has(code);
}

const temporalUnavailable = (what: string, cause: unknown) =>
  new PlatformError('service_unavailable', `Cookbook sessions are temporarily unavailable: ${what}`, {
    hint: 'Retry after a short delay (send an Idempotency-Key header to make retries safe).',
    tool: { hint: 'Retry after a short delay (pass the same idempotencyKey to make retries safe).' },
    cause,
  });

export interface StartInput {
  accountId: string;
  cookbook: Cookbook;
  selectedApis: Record<string, string>;
  idempotencyKey: string | null;
  /** The key starting it (null: a person in the dashboard); an agent key alone sees it afterwards. */
  startedBy: { keyId: string | null; keyKind: 'api' | 'agent' | null };
  /** How many sessions the account may have active at once (SESSIONS_MAX_ACTIVE_PER_ACCOUNT). */
  maxActive: number;
  /** Each chosen API's state for the caller: a choice the caller cannot call now is refused. */
  callability?: ReadonlyMap<string, Callability>;
}

/**
 * How a session's workflow is started: id, task queue, search attributes and memo. Shared with the
 * history recorder (scripts/record-histories.ts), so recorded histories start as real ones do.
 */
export function sessionWorkflowOptions(input: CookbookSessionInput, taskQueue: string) {
  return {
    workflowId: workflowIdFor(input.sessionId),
    taskQueue,
    args: [input] as [CookbookSessionInput],
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.accountId, value: input.accountId },
      { key: SEARCH_ATTRIBUTES.cookbookId, value: input.cookbookId },
      { key: SEARCH_ATTRIBUTES.sessionStatus, value: 'running' },
      { key: SEARCH_ATTRIBUTES.currentStep, value: input.steps[0]!.stepId },
    ],
    // What an operator reads in the Temporal UI next to the search attributes: the account's id,
    // never its email (workflow history is readable by every operator).
    memo: {
      cookbookTitle: input.cookbookTitle,
      accountId: input.accountId,
      selectedApis: input.selectedApis,
      idempotencyKey: input.idempotencyKey,
    },
  };
}

/**
 * Starts a session: one workflow `cookbook-session-<id>`, then its mirror row. Nothing is written
 * to Postgres before Temporal accepted the workflow, so an unreachable Temporal leaves no trace.
 * With an Idempotency-Key the session id is derived from it, so concurrent retries meet the same
 * workflow and answer the same session. An account has at most `maxActive` sessions active: each is
 * a workflow with timers that run for days, and starting one is free.
 */
export async function startSession(
  sql: Sql,
  temporal: TemporalGateway,
  timeoutMs: number,
  input: StartInput,
): Promise<{ row: SessionRow; created: boolean }> {
  const { accountId, cookbook, selectedApis, idempotencyKey } = input;
  if (idempotencyKey !== null) {
    const existing = await findSessionByIdempotencyKey(sql, accountId, idempotencyKey);
    if (existing) return { row: checkReplay(existing, cookbook.id, selectedApis, input.startedBy), created: false };
  }
  await checkSelectedApis(sql, cookbook, selectedApis, input.callability);
  // The account's starts queue behind one lock from the count to the mirror row, so racing starts
  // cannot all pass the cap (a connection is held for at most the start's Temporal budget).
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`cookbook-session-start:${accountId}`}, 0))`;
    if (idempotencyKey !== null) {
      const existing = await findSessionByIdempotencyKey(tx, accountId, idempotencyKey);
      if (existing) return { row: checkReplay(existing, cookbook.id, selectedApis, input.startedBy), created: false };
    }
    const active = await countActiveSessions(tx, accountId);
    if (active >= input.maxActive) {
      throw new PlatformError(
        'conflict',
        `This account already has ${active} active cookbook sessions, the most it may run at once (${input.maxActive})`,
        {
          hint: 'Finish or cancel one first: GET /api/v1/cookbooks/sessions lists the active ones, POST /api/v1/cookbooks/sessions/{sessionId}/cancel frees its slot at once.',
          tool: {
            hint: 'Finish one first (list_sessions lists the active ones), or have a person cancel one in the dashboard, which frees its slot at once.',
          },
        },
      );
    }
    return startLocked(tx, temporal, timeoutMs, input);
  });
}

async function startLocked(db: Db, temporal: TemporalGateway, timeoutMs: number, input: StartInput): Promise<{ row: SessionRow; created: boolean }> {
  const { accountId, cookbook, selectedApis, idempotencyKey } = input;
  const sessionId =
    idempotencyKey === null
      ? `ses_${randomBytes(12).toString('hex')}`
      : `ses_${createHash('sha256').update(`${accountId}\n${idempotencyKey}`).digest('hex').slice(0, 24)}`;
  const workflowInput: CookbookSessionInput = {
    sessionId,
    accountId,
    cookbookId: cookbook.id,
    cookbookTitle: cookbook.title,
    selectedApis,
    idempotencyKey,
    steps: stepPlans(cookbook),
  };
  const workflowId = workflowIdFor(sessionId);
  const startedAt = new Date();
  try {
    await temporal.connection.withDeadline(Date.now() + timeoutMs, () =>
      temporal.client.workflow.start('cookbookSession', sessionWorkflowOptions(workflowInput, temporal.taskQueue)),
    );
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
      if (isTemporalUnavailable(error)) throw temporalUnavailable('the workflow service did not answer', error);
      throw error;
    }
  }
  await insertStartedSession(db, {
    sessionId,
    accountId,
    cookbookId: cookbook.id,
    workflowId,
    totalSteps: cookbook.steps.length,
    firstStepId: cookbook.steps[0]!.stepId,
    selectedApis,
    idempotencyKey,
    startedAt,
    startedByKeyId: input.startedBy.keyId,
  });
  const row = await findSession(db, accountId, sessionId);
  if (!row) throw new Error(`session ${sessionId} has no mirror row after start`);
  // A racing start with the same key but another body may have won the workflow and the row.
  if (idempotencyKey !== null) checkReplay(row, cookbook.id, selectedApis, input.startedBy);
  return { row, created: true };
}

/**
 * The hash of a start request: the cookbook (from the path) and the body after validation, whose
 * only field is `selectedApis`, with keys sorted so that key order and whitespace do not matter.
 */
export function startRequestHash(cookbookId: string, selectedApis: Record<string, string>): string {
  const sorted = Object.keys(selectedApis)
    .sort()
    .map((slot) => [slot, selectedApis[slot]]);
  return createHash('sha256')
    .update(JSON.stringify([cookbookId, sorted]))
    .digest('hex');
}

/**
 * A replayed Idempotency-Key must come with the same request (otherwise 409, naming the earlier
 * session) and, from an agent key, be that key's own: another key's session is not named.
 */
function checkReplay(row: SessionRow, cookbookId: string, selectedApis: Record<string, string>, caller: StartInput['startedBy']): SessionRow {
  const agentKeyId = agentKeyScope(caller);
  if (agentKeyId !== null && row.started_by_key_id !== agentKeyId) {
    throw new PlatformError('idempotency_conflict', 'This Idempotency-Key was already used by another key of this account to start a session', {
      hint: 'Use a new Idempotency-Key (a UUID per start keeps keys apart).',
    });
  }
  if (startRequestHash(row.cookbook_id, row.selected_apis) === startRequestHash(cookbookId, selectedApis)) return row;
  throw new PlatformError('idempotency_conflict', 'This Idempotency-Key was already used to start a session with a different request', {
    hint: `Send the same cookbook and selectedApis to get the earlier session (${row.id}) again, or use a new Idempotency-Key.`,
  });
}

// Compiled step validators, cached per cookbook step and invalidated when the schema changes.
const ajv = createStepSchemaAjv();
const validators = new Map<string, { schema: string; validate: ValidateFunction }>();

/**
 * Validates resultData against the step's inputSchema, here in the edge: ajv compiles schemas to
 * code with `new Function`, which Temporal's deterministic workflow sandbox does not offer, and the
 * edge has the cookbook at hand. The workflow's update validator checks what only it knows: the
 * current step, whether the session ended, and who may complete the step.
 */
export function validateResultData(cookbookId: string, step: CookbookStep, resultData: Record<string, unknown>): void {
  const cacheKey = `${cookbookId}/${step.stepId}`;
  const schema = JSON.stringify(step.inputSchema);
  let entry = validators.get(cacheKey);
  if (!entry || entry.schema !== schema) {
    entry = { schema, validate: ajv.compile(step.inputSchema) };
    validators.set(cacheKey, entry);
  }
  if (entry.validate(resultData)) return;
  const problems = (entry.validate.errors ?? [])
    .slice(0, 5)
    .map((error) => `resultData${error.instancePath.replaceAll('/', '.')} ${error.message ?? 'is invalid'}`)
    .join('; ');
  throw new PlatformError('validation_failed', `resultData does not match step "${step.stepId}": ${problems}`, {
    hint: `GET the step for its inputSchema.${declineHint(step)}`,
  });
}

/**
 * Checks a completion before it goes to the workflow: the decision must be one the step offers (with
 * a note to request changes; the rule is the workflow's own `decisionRefusal`), and an approval's
 * resultData must match the step's inputSchema.
 */
export function checkDecision(
  cookbookId: string,
  step: CookbookStep,
  completion: { decision: Decision; note: string | undefined; resultData: Record<string, unknown> },
): void {
  const refusal = decisionRefusal(stepPlan(step), completion.decision, completion.note);
  if (refusal) throw new PlatformError('validation_failed', refusal.message, { hint: refusal.hint });
  if (completion.decision === 'approve') validateResultData(cookbookId, step, completion.resultData);
}

/** A person who does not approve says so with a decision, never with a "no" in resultData. */
function declineHint(step: CookbookStep): string {
  if (step.kind !== 'human') return '';
  const ways = [
    ...(step.decisions?.reject ? ['send {"decision": "reject", "note": "..."}'] : []),
    ...(step.decisions?.requestChanges ? ['send {"decision": "request_changes", "note": "what to change"} to send it back'] : []),
  ];
  return ways.length === 0 ? '' : ` Completing the step approves it; to decline instead, ${ways.join(', or ')}.`;
}

/** Maps a rejected or failed update to the REST answer. */
function updateError(error: unknown, sessionId: string): PlatformError | null {
  const failure = error instanceof WorkflowUpdateFailedError ? error.cause : null;
  if (failure instanceof ApplicationFailure) {
    switch (failure.type) {
      case REJECTIONS.staleStep:
        return new PlatformError('conflict', failure.message, { hint: `GET /api/v1/cookbooks/sessions/${sessionId}/step for the current step.` });
      case REJECTIONS.sessionEnded:
        return new PlatformError('conflict', failure.message, { hint: `GET /api/v1/cookbooks/sessions/${sessionId} for the outcome.` });
      case REJECTIONS.humanRequired:
        return new PlatformError('forbidden', failure.message, {
          hint: 'A person completes human steps in the dashboard (signed in with the account), not with an API key.',
        });
      case REJECTIONS.decisionNotOffered: {
        const hint = (failure.details?.[0] as { hint?: unknown } | undefined)?.hint;
        return new PlatformError('validation_failed', failure.message, {
          hint:
            typeof hint === 'string' ? hint : 'GET the human step for the decisions it offers; this session may have started before they existed.',
        });
      }
    }
  }
  if (error instanceof WorkflowNotFoundError || (error instanceof ServiceError && /already completed|not found/i.test(error.message))) {
    return new PlatformError('conflict', 'The session has ended', { hint: `GET /api/v1/cookbooks/sessions/${sessionId} for the outcome.` });
  }
  if (isTemporalUnavailable(error) || error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
    return temporalUnavailable('the session did not answer in time', error);
  }
  return null;
}

/**
 * Completes the session's current step through the workflow's Update and answers the session and
 * the next step from the Update's result (the state the transition persisted), with no read of the
 * mirror afterwards; the completer is recorded by the workflow's activity with the step.
 */
export async function completeStep(
  temporal: TemporalGateway,
  timeoutMs: number,
  session: SessionRow,
  cookbook: Cookbook,
  request: CompleteStepRequest,
): Promise<{ session: SessionView; nextStep: StepView | null }> {
  let result: CompleteStepResult;
  try {
    result = await temporal.connection.withDeadline(Date.now() + timeoutMs, () =>
      // One Update id per session, step and completion: the same completion retried after a timeout
      // or a 503 while the first is still in flight joins it and gets its result; a different
      // completion of the same step races it and is refused as stale.
      temporal.client.workflow
        .getHandle(session.workflow_id)
        .executeUpdate(completeStepUpdate, { args: [request], updateId: completionUpdateId(session.id, request, session.version) }),
    );
  } catch (error) {
    throw updateError(error, session.id) ?? error;
  }
  const { nextStepId } = result;
  const after = sessionAfter(session, result.session);
  const nextStep = nextStepId === null || !result.nextStep ? null : stepView(cookbook, after, nextStepId, stepRowOf(session.id, result.nextStep));
  return { session: sessionView(after), nextStep };
}

/** The session row as the mirror holds it after a transition: the row before it with the workflow's snapshot applied. */
function sessionAfter(row: SessionRow, snapshot: SessionSnapshot): SessionRow {
  const updatedAt = new Date(snapshot.updatedAt);
  return {
    ...row,
    status: snapshot.status,
    current_step_id: snapshot.currentStep,
    completed_steps: snapshot.progress.completed,
    total_steps: snapshot.progress.total,
    version: snapshot.version,
    updated_at: updatedAt,
    ended_at: ENDED_STATUSES.includes(snapshot.status) ? updatedAt : null,
    outcome: snapshot.outcome ?? null,
  };
}

/** A step's history row as the mirror holds it, from the record the workflow wrote there. */
function stepRowOf(sessionId: string, record: StepRecord): StepRow {
  const date = (iso: string | null) => (iso === null ? null : new Date(iso));
  return {
    session_id: sessionId,
    step_id: record.stepId,
    position: record.position,
    kind: record.kind,
    status: record.status,
    result_data: record.resultData,
    completed_by: record.completedBy,
    started_at: new Date(record.startedAt),
    remind_at: date(record.remindAt),
    expires_at: new Date(record.expiresAt),
    reminders: record.reminders,
    completed_at: date(record.completedAt),
    // The next step has not been completed, so nobody is named yet.
    completer_name: null,
    decision: record.decision ?? null,
    note: record.note ?? null,
    feedback: record.feedback ?? null,
  };
}

/**
 * The Update id of a completion. `version` is the session's version the caller saw (the mirror row):
 * a step sent back by a request for changes is completed again in a later version, so the same data
 * sent then is a new completion, not a retry that Temporal would answer with the first one's result.
 * A retry of a completion still in flight sees the same version and joins it; one that already
 * landed finds the step done and is answered from the history (priorCompletion).
 */
export function completionUpdateId(
  sessionId: string,
  request: { stepId: string; resultData: Record<string, unknown>; actor: Actor; decision?: Decision; note?: string },
  version?: number,
): string {
  // A decision other than approving is part of the completion (the same data rejected is another completion).
  const decided = request.decision && request.decision !== 'approve' ? `\n${request.decision}\n${request.note ?? ''}` : '';
  const digest = createHash('sha256')
    .update(`${request.actor}\n${JSON.stringify(request.resultData)}${decided}`)
    .digest('hex')
    .slice(0, 16);
  return `complete-step:${sessionId}:${request.stepId}:${version === undefined ? '' : `v${version}:`}${digest}`;
}

/**
 * A completion that already happened, for answering its retry: the step's history shows it
 * completed, by the same kind of actor, with the same resultData. Returns the step that followed it
 * (null when the session ended with it), or undefined when this is not a retry.
 */
export function priorCompletion(
  cookbook: Cookbook,
  history: StepRow[],
  request: { stepId: string; resultData: Record<string, unknown>; actor: Actor },
): { nextStepId: string | null } | undefined {
  const done = history.find((row) => row.step_id === request.stepId);
  if (!done || done.status !== 'completed' || done.completed_by !== request.actor) return undefined;
  if (!isDeepStrictEqual(done.result_data, request.resultData)) return undefined;
  const position = cookbook.steps.findIndex((step) => step.stepId === request.stepId);
  const next = cookbook.steps[position + 1];
  return { nextStepId: next && history.some((row) => row.step_id === next.stepId) ? next.stepId : null };
}

export async function cancelSession(temporal: TemporalGateway, timeoutMs: number, session: SessionRow, reason: string | undefined) {
  try {
    return await temporal.connection.withDeadline(Date.now() + timeoutMs, () =>
      temporal.client.workflow.getHandle(session.workflow_id).executeUpdate(cancelSessionUpdate, { args: [reason === undefined ? {} : { reason }] }),
    );
  } catch (error) {
    throw updateError(error, session.id) ?? error;
  }
}

export { listPendingHumanSteps, listSessionSteps };
