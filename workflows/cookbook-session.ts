// One workflow per cookbook session. Deterministic only: time is workflow time, activities are
// imported as types, and every outside effect (the Postgres mirror, the Redis event stream) goes
// through the `recordSessionChange` activity, which is idempotent.
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import {
  cancelSessionUpdate,
  completeStepUpdate,
  ENDED_STATUSES,
  REJECTIONS,
  SEARCH_ATTRIBUTES,
  sessionStateQuery,
  type CompleteStepRequest,
  type CompleteStepResult,
  type CookbookSessionInput,
  type SessionEvent,
  type SessionEventName,
  type SessionActivities,
  type SessionOutcome,
  type SessionSnapshot,
  type SessionStatus,
  type StepRecord,
} from './messages.js';

const { recordSessionChange } = proxyActivities<SessionActivities>({
  startToCloseTimeout: '30 seconds',
  // Postgres or Redis being away must not lose a session: retry until they are back. Only a
  // session whose account or cookbook is gone fails for good (see the activity).
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '15 seconds', nonRetryableErrorTypes: ['SessionOrphaned'] },
});

const iso = (ms: number) => new Date(ms).toISOString();

type PendingCompletion = CompleteStepRequest & { result: CompleteStepResult | null; rejected: boolean };

/** Runs the session's steps in order; returns the final snapshot. */
export async function cookbookSession(input: CookbookSessionInput): Promise<SessionSnapshot> {
  const total = input.steps.length;
  const startedAt = iso(Date.now());
  let status: SessionStatus = 'running';
  let index = 0;
  let completed = 0;
  let version = 0;
  let seq = 0;
  let updatedAt = startedAt;
  let cancelRequested = false;
  let outcome: SessionOutcome | null = null;
  /** A person's note for the step a request for changes sent the session back to. */
  let feedback: { forStepId: string; fromStepId: string; note: string } | null = null;
  /** A completion the update handler accepted, until the main loop has applied and persisted it. */
  let pending: PendingCompletion | null = null;
  let cancelResult: SessionSnapshot | null = null;
  // Read through a function: the handlers change `pending` behind the main loop's back.
  const accepted = () => pending;
  /** The completion applied in this transition, answered once the transition is persisted. */
  let applied: PendingCompletion | null = null;

  const ended = () => ENDED_STATUSES.includes(status);
  const currentStep = () => (ended() ? null : (input.steps[index]?.stepId ?? null));
  const snapshot = (): SessionSnapshot => ({
    sessionId: input.sessionId,
    cookbookId: input.cookbookId,
    status,
    currentStep: currentStep(),
    progress: { completed, total },
    startedAt,
    updatedAt,
    version,
    ...(outcome === null ? {} : { outcome }),
  });

  /** The rules a completion must pass; run by the validator (before history) and again by the handler. */
  const checkCompletion = (request: CompleteStepRequest) => {
    if (ended() || cancelRequested) {
      throw ApplicationFailure.create({ type: REJECTIONS.sessionEnded, message: `The session has ended (${status})`, nonRetryable: true });
    }
    const step = input.steps[index];
    if (pending !== null || !step || request.stepId !== step.stepId) {
      throw ApplicationFailure.create({
        type: REJECTIONS.staleStep,
        message: `Step "${request.stepId}" is not the current step${step && pending === null ? ` ("${step.stepId}")` : ''}`,
        nonRetryable: true,
        details: [{ currentStep: pending === null ? (step?.stepId ?? null) : null }],
      });
    }
    if (step.kind === 'human' && request.actor !== 'human') {
      throw ApplicationFailure.create({ type: REJECTIONS.humanRequired, message: `Step "${step.stepId}" must be completed by a person`, nonRetryable: true });
    }
    const decision = request.decision ?? 'approve';
    const offered = decision === 'approve' || (decision === 'reject' ? step.decisions?.reject === true : step.decisions?.requestChangesBackTo !== undefined);
    if (!offered || (decision === 'request_changes' && !request.note)) {
      throw ApplicationFailure.create({
        type: REJECTIONS.decisionNotOffered,
        message: offered ? 'Requesting changes needs a note saying what to change' : `Step "${step.stepId}" does not offer the decision "${decision}"`,
        nonRetryable: true,
      });
    }
  };

  setHandler(sessionStateQuery, snapshot);
  setHandler(
    completeStepUpdate,
    async (request) => {
      // Two completions delivered together both pass their validators; the first handler to run wins.
      checkCompletion(request);
      const mine: PendingCompletion = { ...request, result: null, rejected: false };
      pending = mine;
      await condition(() => mine.result !== null || mine.rejected);
      if (mine.result === null) {
        throw ApplicationFailure.create({ type: REJECTIONS.sessionEnded, message: `The session has ended (${status})`, nonRetryable: true });
      }
      return mine.result;
    },
    { validator: checkCompletion, description: 'Complete the current step with its result data' },
  );
  setHandler(
    cancelSessionUpdate,
    async (_request) => {
      if (ended() || cancelRequested) {
        throw ApplicationFailure.create({ type: REJECTIONS.sessionEnded, message: `The session has ended (${status})`, nonRetryable: true });
      }
      cancelRequested = true;
      await condition(() => cancelResult !== null);
      return cancelResult!;
    },
    {
      validator: (_request) => {
        if (ended() || cancelRequested) {
          throw ApplicationFailure.create({ type: REJECTIONS.sessionEnded, message: `The session has ended (${status})`, nonRetryable: true });
        }
      },
      description: 'Cancel the session',
    },
  );

  // Events and step rows waiting for the next commit; one activity call per transition.
  let events: SessionEvent[] = [];
  const dirtySteps = new Map<string, StepRecord>();
  const emit = (name: SessionEventName, data: Record<string, unknown> = {}) => {
    seq += 1;
    events.push({ seq, name, data: { sessionId: input.sessionId, cookbookId: input.cookbookId, ...data, at: iso(Date.now()) } });
  };
  let searchState = { status: '', step: '' };
  const commit = async (options: { eventsOnly?: boolean } = {}) => {
    version += 1;
    updatedAt = iso(Date.now());
    const step = currentStep() ?? '';
    if (searchState.status !== status || searchState.step !== step) {
      upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.sessionStatus, value: status },
        { key: SEARCH_ATTRIBUTES.currentStep, value: step === '' ? null : step },
      ]);
      searchState = { status, step };
    }
    const batch = events;
    events = [];
    const steps = [...dirtySteps.values()].map((record) => ({ ...record }));
    dirtySteps.clear();
    const recorded = recordSessionChange({
      input: {
        sessionId: input.sessionId,
        accountId: input.accountId,
        cookbookId: input.cookbookId,
        selectedApis: input.selectedApis,
        idempotencyKey: input.idempotencyKey,
      },
      session: snapshot(),
      endedAt: ended() ? updatedAt : null,
      steps: options.eventsOnly ? [] : steps,
      events: batch,
      eventsOnly: options.eventsOnly ?? false,
    });
    try {
      await recorded;
    } catch (error) {
      // Not recorded: its events go out with the next attempt, so the stream keeps every number.
      events = [...batch, ...events];
      throw error;
    }
  };
  const progress = () => ({ completed, total });

  const finish = async (final: SessionStatus, name: SessionEventName, data: Record<string, unknown> = {}) => {
    status = final;
    emit(name, { status: final, progress: progress(), ...data });
    await commit();
  };

  /**
   * Answers every update handler still waiting (an applied completion gets the final state, one that
   * was not applied is rejected as "session ended", a cancellation gets the final state), then lets
   * the handlers return before the workflow completes.
   */
  const settle = async (): Promise<SessionSnapshot> => {
    const final = snapshot();
    if (applied !== null && applied.result === null) applied.result = { session: final, nextStepId: null, nextStep: null };
    const waiting = accepted();
    if (waiting !== null && waiting !== applied && waiting.result === null) waiting.rejected = true;
    if (cancelRequested && cancelResult === null) cancelResult = final;
    await condition(allHandlersFinished);
    return final;
  };

  try {
    emit('session.started', { cookbookTitle: input.cookbookTitle, selectedApis: input.selectedApis, progress: progress() });
    for (index = 0; index < total; index += 1) {
      const step = input.steps[index]!;
      const stepStartMs = Date.now();
      const expiresAtMs = stepStartMs + step.expiresAfterMs;
      let nextReminderMs = step.reminderAfterMs === null ? Infinity : stepStartMs + step.reminderAfterMs;
      const record: StepRecord = {
        stepId: step.stepId,
        position: index,
        kind: step.kind,
        status: 'pending',
        resultData: null,
        completedBy: null,
        startedAt: iso(stepStartMs),
        remindAt: nextReminderMs < expiresAtMs ? iso(nextReminderMs) : null,
        expiresAt: iso(expiresAtMs),
        reminders: 0,
        completedAt: null,
      };
      if (feedback !== null && feedback.forStepId === step.stepId) {
        record.feedback = { fromStepId: feedback.fromStepId, note: feedback.note };
        feedback = null;
      }
      dirtySteps.set(step.stepId, record);
      status = step.kind === 'human' ? 'waiting_for_human' : 'running';
      const stepData = { stepId: step.stepId, title: step.title, kind: step.kind, position: index, progress: progress() };
      emit('step.started', stepData);
      if (step.kind === 'human') emit('human_step.pending', { ...stepData, remindAt: record.remindAt, expiresAt: record.expiresAt });
      await commit();
      // The completion that led here (if any) is answered once the next step is persisted too.
      if (applied !== null) {
        applied.result = { session: snapshot(), nextStepId: step.stepId, nextStep: { ...record } };
        applied = null;
        pending = null;
      }

      for (;;) {
        const waitMs = Math.max(1, Math.min(expiresAtMs, nextReminderMs) - Date.now());
        if (await condition(() => pending !== null || cancelRequested, waitMs)) break;
        if (Date.now() >= expiresAtMs) {
          record.status = 'expired';
          dirtySteps.set(step.stepId, record);
          await finish('expired', 'session.expired', { stepId: step.stepId, title: step.title, kind: step.kind });
          return await settle();
        }
        if (Date.now() >= nextReminderMs) {
          record.reminders += 1;
          nextReminderMs += step.reminderAfterMs!;
          record.remindAt = nextReminderMs < expiresAtMs ? iso(nextReminderMs) : null;
          dirtySteps.set(step.stepId, record);
          emit('human_step.reminder', { stepId: step.stepId, title: step.title, reminder: record.reminders, expiresAt: record.expiresAt });
          await commit();
        }
      }

      const completion = accepted();
      if (completion === null) {
        // Woken by a cancellation.
        record.status = 'cancelled';
        dirtySteps.set(step.stepId, record);
        await finish('cancelled', 'session.cancelled', { stepId: step.stepId });
        return await settle();
      }
      record.status = 'completed';
      record.resultData = completion.resultData;
      record.completedBy = completion.actor;
      if (completion.completer) record.completer = completion.completer;
      record.completedAt = iso(Date.now());
      record.remindAt = null;
      dirtySteps.set(step.stepId, record);
      applied = completion;
      const decision = completion.decision ?? 'approve';
      // Decisions other than approving came with this change; sessions that never see one replay as before.
      if (decision !== 'approve' && patched('human-step-decisions')) {
        record.decision = decision;
        record.note = completion.note ?? null;
        const decided = { stepId: step.stepId, title: step.title, kind: step.kind, completedBy: completion.actor, note: record.note };
        if (decision === 'reject') {
          completed += 1;
          emit('step.completed', { ...decided, decision, progress: progress() });
          emit('human_step.rejected', { ...decided, progress: progress() });
          outcome = 'rejected';
          // The remaining steps do not run: the session is over, and it says how it came out.
          await finish('completed', 'session.completed', { outcome });
          return await settle();
        }
        const backTo = step.decisions!.requestChangesBackTo!;
        const back = input.steps.findIndex((candidate) => candidate.stepId === backTo);
        completed = back;
        emit('human_step.changes_requested', { ...decided, backTo, progress: progress() });
        feedback = { forStepId: backTo, fromStepId: step.stepId, note: record.note ?? '' };
        // The loop's increment lands on the step the person sent the session back to.
        index = back - 1;
        continue;
      }
      completed += 1;
      const doneData = { stepId: step.stepId, title: step.title, kind: step.kind, completedBy: completion.actor, progress: progress() };
      emit('step.completed', doneData);
      if (step.kind === 'human') emit('human_step.completed', doneData);
    }
    await finish('completed', 'session.completed');
    // The last completion is answered, and a cancellation that raced it finds the session ended.
    return await settle();
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    // The session cannot be recorded any more (its account or cookbook is gone): end it as failed,
    // telling followers of the event stream; the mirror rows went with the account.
    status = 'failed';
    emit('session.failed', { status, progress: progress(), reason: error.cause?.message ?? error.message });
    await commit({ eventsOnly: true });
    return await settle();
  }
}

