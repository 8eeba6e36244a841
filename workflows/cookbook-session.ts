// One workflow per cookbook session. Deterministic only: time is workflow time, activities are
// imported as types, and every outside effect (the Postgres mirror, the Redis event stream) goes
// through the `recordSessionChange` activity, which is idempotent.
//
// The session is a state machine: `CookbookSession` holds its state, the message handlers change
// it, and `run` moves from step to step, each step ending in a transition (the next step, an earlier
// one a person sent it back to, or the end). The order of commands (search-attribute upserts,
// activities, timers, patch markers) is what recorded histories replay against: see README.md.
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
  ACTIVITY_FAILURES,
  cancelSessionUpdate,
  completeStepUpdate,
  decisionRefusal,
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
  type StepPlan,
  type StepRecord,
} from './messages.js';

const { recordSessionChange } = proxyActivities<SessionActivities>({
  startToCloseTimeout: '30 seconds',
  // Postgres or Redis being away must not lose a session: retry while they come back, for up to a
  // day, then end the session as failed rather than retry for ever. Errors no retry can fix (the
  // account is gone, Postgres refuses the data) fail at once: see the activity.
  scheduleToCloseTimeout: '24 hours',
  retry: {
    initialInterval: '500 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '15 seconds',
    nonRetryableErrorTypes: [ACTIVITY_FAILURES.orphaned, ACTIVITY_FAILURES.unrecordable],
  },
});

const iso = (ms: number) => new Date(ms).toISOString();

type PendingCompletion = CompleteStepRequest & { result: CompleteStepResult | null; rejected: boolean };

/** Where a step leaves the session: at another step's position, or ended (its final state recorded). */
type Transition = { to: number } | 'ended';

/** A person's note for the step a request for changes sent the session back to. */
interface Feedback {
  forStepId: string;
  fromStepId: string;
  note: string;
}

const sessionEnded = (status: SessionStatus) =>
  ApplicationFailure.create({ type: REJECTIONS.sessionEnded, message: `The session has ended (${status})`, nonRetryable: true });

/** Runs the session's steps; returns the final snapshot. */
export async function cookbookSession(input: CookbookSessionInput): Promise<SessionSnapshot> {
  return new CookbookSession(input).run();
}

class CookbookSession {
  private readonly input: CookbookSessionInput;
  private readonly startedAt: string;
  private status: SessionStatus = 'running';
  /** The position of the step the session is at. */
  private position = 0;
  private completed = 0;
  /** Number of transitions so far (see SessionSnapshot.version). */
  private version = 0;
  private updatedAt: string;
  private outcome: SessionOutcome | null = null;
  private feedback: Feedback | null = null;

  /** A completion the update handler accepted, until `run` has applied and persisted it. */
  private pending: PendingCompletion | null = null;
  /** The completion applied in this transition, answered once the transition is persisted. */
  private applied: PendingCompletion | null = null;
  private cancelRequested = false;
  private cancelResult: SessionSnapshot | null = null;

  /** Events and step rows waiting for the next commit; one activity call per transition. */
  private events: SessionEvent[] = [];
  private readonly dirtySteps = new Map<string, StepRecord>();
  private seq = 0;
  /** What the last recorded transition left: a transition that cannot be recorded is dropped back to it. */
  private recorded: { seq: number; completed: number; outcome: SessionOutcome | null } = { seq: 0, completed: 0, outcome: null };
  private searchState = { status: '', step: '' };

  constructor(input: CookbookSessionInput) {
    this.input = input;
    this.startedAt = iso(Date.now());
    this.updatedAt = this.startedAt;
    setHandler(sessionStateQuery, () => this.snapshot());
    setHandler(completeStepUpdate, (request) => this.onCompleteStep(request), {
      validator: (request) => this.checkCompletion(request),
      description: 'Complete the current step with its result data',
    });
    setHandler(cancelSessionUpdate, (_request) => this.onCancel(), {
      validator: (_request) => this.checkNotEnded(),
      description: 'Cancel the session',
    });
  }

  // --- State -------------------------------------------------------------------------------------

  private get total(): number {
    return this.input.steps.length;
  }
  private ended(): boolean {
    return ENDED_STATUSES.includes(this.status);
  }
  private currentStep(): string | null {
    return this.ended() ? null : (this.input.steps[this.position]?.stepId ?? null);
  }
  private progress() {
    return { completed: this.completed, total: this.total };
  }
  private snapshot(): SessionSnapshot {
    return {
      sessionId: this.input.sessionId,
      cookbookId: this.input.cookbookId,
      status: this.status,
      currentStep: this.currentStep(),
      progress: this.progress(),
      startedAt: this.startedAt,
      updatedAt: this.updatedAt,
      version: this.version,
      ...(this.outcome === null ? {} : { outcome: this.outcome }),
    };
  }

  // --- Message handlers --------------------------------------------------------------------------

  private checkNotEnded(): void {
    if (this.ended() || this.cancelRequested) throw sessionEnded(this.status);
  }

  /** The rules a completion must pass; run by the validator (before history) and again by the handler. */
  private checkCompletion(request: CompleteStepRequest): void {
    this.checkNotEnded();
    const step = this.input.steps[this.position];
    if (this.pending !== null || !step || request.stepId !== step.stepId) {
      const current = this.pending === null ? (step?.stepId ?? null) : null;
      throw ApplicationFailure.create({
        type: REJECTIONS.staleStep,
        message: `Step "${request.stepId}" is not the current step${current === null ? '' : ` ("${current}")`}`,
        nonRetryable: true,
        details: [{ currentStep: current }],
      });
    }
    if (step.kind === 'human' && request.actor !== 'human') {
      throw ApplicationFailure.create({
        type: REJECTIONS.humanRequired,
        message: `Step "${step.stepId}" must be completed by a person`,
        nonRetryable: true,
      });
    }
    const refusal = decisionRefusal(step, request.decision ?? 'approve', request.note);
    if (refusal)
      throw ApplicationFailure.create({
        type: REJECTIONS.decisionNotOffered,
        message: refusal.message,
        nonRetryable: true,
        details: [{ hint: refusal.hint }],
      });
  }

  private async onCompleteStep(request: CompleteStepRequest): Promise<CompleteStepResult> {
    // Two completions delivered together both pass their validators; the first handler to run wins.
    this.checkCompletion(request);
    const mine: PendingCompletion = { ...request, result: null, rejected: false };
    this.pending = mine;
    await condition(() => mine.result !== null || mine.rejected);
    if (mine.result === null) throw sessionEnded(this.status);
    return mine.result;
  }

  private async onCancel(): Promise<SessionSnapshot> {
    this.checkNotEnded();
    this.cancelRequested = true;
    await condition(() => this.cancelResult !== null);
    return this.cancelResult!;
  }

  // --- Recording ---------------------------------------------------------------------------------

  private emit(name: SessionEventName, data: Record<string, unknown> = {}): void {
    this.seq += 1;
    this.events.push({
      seq: this.seq,
      name,
      data: { sessionId: this.input.sessionId, cookbookId: this.input.cookbookId, ...data, at: iso(Date.now()) },
    });
  }

  private markDirty(record: StepRecord): void {
    this.dirtySteps.set(record.stepId, record);
  }

  /** Persists one transition: the search attributes when they changed, then the activity. */
  private async commit(options: { eventsOnly?: boolean } = {}): Promise<void> {
    this.version += 1;
    this.updatedAt = iso(Date.now());
    const step = this.currentStep() ?? '';
    if (this.searchState.status !== this.status || this.searchState.step !== step) {
      upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.sessionStatus, value: this.status },
        { key: SEARCH_ATTRIBUTES.currentStep, value: step === '' ? null : step },
      ]);
      this.searchState = { status: this.status, step };
    }
    const batch = this.events;
    this.events = [];
    const steps = [...this.dirtySteps.values()].map((record) => ({ ...record }));
    this.dirtySteps.clear();
    const { sessionId, accountId, cookbookId, selectedApis, idempotencyKey } = this.input;
    try {
      await recordSessionChange({
        input: { sessionId, accountId, cookbookId, selectedApis, idempotencyKey },
        session: this.snapshot(),
        endedAt: this.ended() ? this.updatedAt : null,
        steps: options.eventsOnly ? [] : steps,
        events: batch,
        eventsOnly: options.eventsOnly ?? false,
      });
    } catch (error) {
      // Not recorded: its events go out with the next attempt, so the stream keeps every number.
      this.events = [...batch, ...this.events];
      throw error;
    }
    this.recorded = { seq: batch.at(-1)?.seq ?? this.recorded.seq, completed: this.completed, outcome: this.outcome };
  }

  private async finish(final: SessionStatus, name: SessionEventName, data: Record<string, unknown> = {}): Promise<'ended'> {
    this.status = final;
    this.emit(name, { status: final, progress: this.progress(), ...data });
    await this.commit();
    return 'ended';
  }

  /**
   * Answers every update handler still waiting (an applied completion gets the final state, one that
   * was not applied is rejected as "session ended", a cancellation gets the final state), then lets
   * the handlers return before the workflow completes.
   */
  private async settle(): Promise<SessionSnapshot> {
    const final = this.snapshot();
    const { applied } = this;
    if (applied !== null && applied.result === null) applied.result = { session: final, nextStepId: null, nextStep: null };
    const waiting = this.pending;
    if (waiting !== null && waiting !== applied && waiting.result === null) waiting.rejected = true;
    if (this.cancelRequested && this.cancelResult === null) this.cancelResult = final;
    await condition(allHandlersFinished);
    return final;
  }

  // --- The state machine -------------------------------------------------------------------------

  async run(): Promise<SessionSnapshot> {
    try {
      this.emit('session.started', { cookbookTitle: this.input.cookbookTitle, selectedApis: this.input.selectedApis, progress: this.progress() });
      while (this.position < this.total) {
        const transition = await this.runStep(this.input.steps[this.position]!);
        if (transition === 'ended') return await this.settle();
        this.position = transition.to;
      }
      await this.finish('completed', 'session.completed');
      // The last completion is answered, and a cancellation that raced it finds the session ended.
      return await this.settle();
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      return await this.fail(error);
    }
  }

  /** Starts the step at `position`, waits for its completion, a cancellation or its expiry, and applies what came. */
  private async runStep(step: StepPlan): Promise<Transition> {
    const startMs = Date.now();
    const expiresAtMs = startMs + step.expiresAfterMs;
    const firstReminderMs = step.reminderAfterMs === null ? Infinity : startMs + step.reminderAfterMs;
    const record: StepRecord = {
      stepId: step.stepId,
      position: this.position,
      kind: step.kind,
      status: 'pending',
      resultData: null,
      completedBy: null,
      startedAt: iso(startMs),
      remindAt: firstReminderMs < expiresAtMs ? iso(firstReminderMs) : null,
      expiresAt: iso(expiresAtMs),
      reminders: 0,
      completedAt: null,
    };
    if (this.feedback !== null && this.feedback.forStepId === step.stepId) {
      record.feedback = { fromStepId: this.feedback.fromStepId, note: this.feedback.note };
      this.feedback = null;
    }
    this.markDirty(record);
    this.status = step.kind === 'human' ? 'waiting_for_human' : 'running';
    const stepData = { stepId: step.stepId, title: step.title, kind: step.kind, position: this.position, progress: this.progress() };
    this.emit('step.started', stepData);
    if (step.kind === 'human') this.emit('human_step.pending', { ...stepData, remindAt: record.remindAt, expiresAt: record.expiresAt });
    await this.commit();
    // The completion that led here (if any) is answered once the next step is persisted too.
    if (this.applied !== null) {
      this.applied.result = { session: this.snapshot(), nextStepId: step.stepId, nextStep: { ...record } };
      this.applied = null;
      this.pending = null;
    }

    if (!(await this.awaitCompletion(step, record, expiresAtMs, firstReminderMs))) {
      record.status = 'expired';
      this.markDirty(record);
      return this.finish('expired', 'session.expired', { stepId: step.stepId, title: step.title, kind: step.kind });
    }
    const completion = this.pending;
    if (completion === null) {
      // Woken by a cancellation.
      record.status = 'cancelled';
      this.markDirty(record);
      return this.finish('cancelled', 'session.cancelled', { stepId: step.stepId });
    }
    return this.applyCompletion(step, record, completion);
  }

  /** Waits for a completion or a cancellation, reminding on the way; false when the step expired first. */
  private async awaitCompletion(step: StepPlan, record: StepRecord, expiresAtMs: number, firstReminderMs: number): Promise<boolean> {
    let nextReminderMs = firstReminderMs;
    for (;;) {
      const waitMs = Math.max(1, Math.min(expiresAtMs, nextReminderMs) - Date.now());
      if (await condition(() => this.pending !== null || this.cancelRequested, waitMs)) return true;
      if (Date.now() >= expiresAtMs) return false;
      if (Date.now() >= nextReminderMs) {
        record.reminders += 1;
        nextReminderMs += step.reminderAfterMs!;
        record.remindAt = nextReminderMs < expiresAtMs ? iso(nextReminderMs) : null;
        this.markDirty(record);
        this.emit('human_step.reminder', { stepId: step.stepId, title: step.title, reminder: record.reminders, expiresAt: record.expiresAt });
        await this.commit();
      }
    }
  }

  private async applyCompletion(step: StepPlan, record: StepRecord, completion: PendingCompletion): Promise<Transition> {
    record.status = 'completed';
    record.resultData = completion.resultData;
    record.completedBy = completion.actor;
    if (completion.completer) record.completer = completion.completer;
    record.completedAt = iso(Date.now());
    record.remindAt = null;
    this.markDirty(record);
    this.applied = completion;
    const decision = completion.decision ?? 'approve';
    // Decisions other than approving came with this change; sessions that never see one replay as before.
    if (decision !== 'approve' && patched('human-step-decisions')) {
      record.decision = decision;
      record.note = completion.note ?? null;
      const decided = { stepId: step.stepId, title: step.title, kind: step.kind, completedBy: completion.actor, note: record.note };
      return decision === 'reject' ? this.rejected(decided) : this.sendBack(step, decided);
    }
    // A person's approval is a decision too, and the step's history says so.
    if (step.kind === 'human') record.decision = 'approve';
    this.completed += 1;
    const doneData = { stepId: step.stepId, title: step.title, kind: step.kind, completedBy: completion.actor, progress: this.progress() };
    this.emit('step.completed', doneData);
    if (step.kind === 'human') this.emit('human_step.completed', { ...doneData, decision });
    return { to: this.position + 1 };
  }

  /** A person rejected the step: the remaining steps do not run, and the session says how it came out. */
  private async rejected(decided: Record<string, unknown>): Promise<Transition> {
    this.completed += 1;
    this.emit('step.completed', { ...decided, decision: 'reject', progress: this.progress() });
    this.emit('human_step.rejected', { ...decided, progress: this.progress() });
    this.outcome = 'rejected';
    return this.finish('completed', 'session.completed', { outcome: this.outcome });
  }

  /** A person requested changes: back to the agent step the cookbook names, carrying their note. */
  private sendBack(step: StepPlan, decided: { note: string | null }): Transition {
    const backTo = step.decisions!.requestChangesBackTo!;
    const back = this.input.steps.findIndex((candidate) => candidate.stepId === backTo);
    this.completed = back;
    this.emit('human_step.changes_requested', { ...decided, backTo, progress: this.progress() });
    this.feedback = { forStepId: backTo, fromStepId: step.stepId, note: decided.note ?? '' };
    return { to: back };
  }

  /**
   * A transition could not be recorded and no retry will help: the session ends as failed, telling
   * followers of the event stream why. An orphaned session (its account or cookbook gone) has no
   * mirror rows left, so only the stream hears of it; any other failure also ends the mirror's row,
   * without the transition that could not be stored, so the session is not left open for ever.
   */
  private async fail(error: ActivityFailure): Promise<SessionSnapshot> {
    const reason = error.cause?.message ?? error.message;
    const orphaned = error.cause instanceof ApplicationFailure && error.cause.type === ACTIVITY_FAILURES.orphaned;
    // Only failures other than an orphaned session take this path, and none reached the workflow before it.
    if (!orphaned && patched('record-session-failures')) {
      // The step whose completion could not be stored, or else the one the session waited on.
      const stepId = this.applied?.stepId ?? this.input.steps[this.position]?.stepId ?? null;
      this.events = [];
      this.dirtySteps.clear();
      ({ seq: this.seq, completed: this.completed, outcome: this.outcome } = this.recorded);
      this.status = 'failed';
      this.emit('session.failed', { status: this.status, progress: this.progress(), reason, stepId });
      try {
        await this.commit();
      } catch (again) {
        if (!(again instanceof ActivityFailure)) throw again;
        await this.commit({ eventsOnly: true });
      }
      return this.settle();
    }
    this.status = 'failed';
    this.emit('session.failed', { status: this.status, progress: this.progress(), reason });
    await this.commit({ eventsOnly: true });
    return this.settle();
  }
}
