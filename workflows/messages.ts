// The cookbook-session workflow's contract, imported by the workflow, the worker's activities and
// the edge's Temporal client alike: input, messages (updates, query), search attributes, events.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineUpdate } from '@temporalio/workflow';

export type SessionStatus = 'running' | 'waiting_for_human' | 'completed' | 'failed' | 'cancelled' | 'expired';
export const ENDED_STATUSES: readonly SessionStatus[] = ['completed', 'failed', 'cancelled', 'expired'];

/** Who completes a step: 'key' for an API or agent key, 'human' for the dashboard's cookie session. */
export type Actor = 'key' | 'human';

export const workflowIdFor = (sessionId: string) => `cookbook-session-${sessionId}`;

/** What a person decides on a human step: approve (complete it), reject, or send it back with a note. */
export type Decision = 'approve' | 'reject' | 'request_changes';

/** The decisions a human step offers besides approving, as its cookbook declares them. */
export interface StepDecisions {
  /** Rejecting ends the session as `completed` with outcome `rejected`; later steps do not run. */
  reject?: boolean;
  /** Requesting changes sends the session back to this earlier agent step, with the person's note. */
  requestChangesBackTo?: string;
}

/** The plan of one step as the workflow runs it; copied from the cookbook when the session starts. */
export interface StepPlan {
  stepId: string;
  title: string;
  kind: 'agent' | 'human';
  /** Human steps: a `human_step.reminder` event after this long, and again at each multiple. */
  reminderAfterMs: number | null;
  /** The session becomes `expired` when the step is still open after this long. */
  expiresAfterMs: number;
  /** Human steps: the decisions offered besides approving (absent in sessions started before they existed). */
  decisions?: StepDecisions;
}

export interface CookbookSessionInput {
  sessionId: string;
  accountId: string;
  cookbookId: string;
  cookbookTitle: string;
  selectedApis: Record<string, string>;
  idempotencyKey: string | null;
  steps: StepPlan[];
}

export interface SessionSnapshot {
  sessionId: string;
  cookbookId: string;
  status: SessionStatus;
  currentStep: string | null;
  progress: { completed: number; total: number };
  startedAt: string;
  updatedAt: string;
  /** Number of transitions so far; the Postgres mirror keeps the highest it has seen. */
  version: number;
  /** How a completed session came out, when a person decided it: 'rejected'. */
  outcome?: SessionOutcome | null;
}

export type SessionOutcome = 'rejected';

/**
 * Who completed a step, by id (never an email or a key: workflow history is readable by every
 * operator): the key that sent the completion, the account's owner or one of its approvers signed in.
 */
export type StepCompleter = { keyId: string } | { personId: string } | { memberId: string };

export interface CompleteStepRequest {
  stepId: string;
  resultData: Record<string, unknown>;
  actor: Actor;
  /** Recorded with the completed step. The edge always sends it; completions in histories recorded before it have none. */
  completer?: StepCompleter;
  /** Human steps: approve (the default), reject, or request changes; the latter two only where offered. */
  decision?: Decision;
  /** The person's note; required to request changes. */
  note?: string;
}

export interface CompleteStepResult {
  session: SessionSnapshot;
  nextStepId: string | null;
  /**
   * The next step's history row as the transition recorded it, so the edge answers without reading
   * the mirror back; null when the session ended.
   */
  nextStep: StepRecord | null;
}

/** Completes the current step. The validator rejects (before history) a stale step, an ended session and a key completing a human step. */
export const completeStepUpdate = defineUpdate<CompleteStepResult, [CompleteStepRequest]>('completeStep');
/** Cancels a running session; rejected when it has already ended. */
export const cancelSessionUpdate = defineUpdate<SessionSnapshot, [{ reason?: string }]>('cancelSession');
export const sessionStateQuery = defineQuery<SessionSnapshot>('sessionState');

/** ApplicationFailure types the validators and handlers throw; the edge maps them to statuses. */
export const REJECTIONS = {
  staleStep: 'StaleStep',
  sessionEnded: 'SessionEnded',
  humanRequired: 'HumanRequired',
  decisionNotOffered: 'DecisionNotOffered',
} as const;

/**
 * Why a decision cannot be taken on a step, or null when it can: approving is always offered,
 * rejecting and requesting changes only where the step's cookbook offers them, and a request for
 * changes must say what to change. The one copy of the rule: the edge checks it before calling the
 * workflow (to answer 400 with this hint), the workflow's update validator again (for callers that
 * reach Temporal directly).
 */
export function decisionRefusal(
  step: Pick<StepPlan, 'stepId' | 'decisions'>,
  decision: Decision,
  note: string | undefined,
): { message: string; hint: string } | null {
  if (decision === 'approve') return null;
  const offered = decision === 'reject' ? step.decisions?.reject === true : step.decisions?.requestChangesBackTo !== undefined;
  if (!offered) {
    return {
      message: `Step "${step.stepId}" does not offer the decision "${decision}"`,
      hint: 'GET the human step for the decisions it offers (a session started before they existed offers none), or approve it with resultData.',
    };
  }
  if (decision === 'request_changes' && !note) {
    return { message: 'note is required with request_changes: say what should change', hint: 'Send {"decision": "request_changes", "note": "..."}.' };
  }
  return null;
}

/**
 * ApplicationFailure types the session's activity throws when no retry can help. The workflow ends
 * the session as failed on either; an orphaned session has no mirror rows left to update.
 */
export const ACTIVITY_FAILURES = {
  /** The session's account or cookbook was deleted. */
  orphaned: 'SessionOrphaned',
  /** Postgres refused the data itself (a data exception or a constraint), or it broke a schema. */
  unrecordable: 'SessionUnrecordable',
} as const;

export const SEARCH_ATTRIBUTES = {
  accountId: defineSearchAttributeKey('AccountId', SearchAttributeType.KEYWORD),
  cookbookId: defineSearchAttributeKey('CookbookId', SearchAttributeType.KEYWORD),
  sessionStatus: defineSearchAttributeKey('SessionStatus', SearchAttributeType.KEYWORD),
  currentStep: defineSearchAttributeKey('CurrentStep', SearchAttributeType.KEYWORD),
};

export type SessionEventName =
  | 'session.started'
  | 'step.started'
  | 'step.completed'
  | 'human_step.pending'
  | 'human_step.reminder'
  | 'human_step.completed'
  | 'human_step.rejected'
  | 'human_step.changes_requested'
  | 'session.completed'
  | 'session.failed'
  | 'session.expired'
  | 'session.cancelled';

export const FINAL_EVENTS: readonly SessionEventName[] = ['session.completed', 'session.failed', 'session.expired', 'session.cancelled'];

/** An event as the workflow numbers it: `seq` starts at 1 and becomes the Redis stream id `<seq>-0`. */
export interface SessionEvent {
  seq: number;
  name: SessionEventName;
  data: Record<string, unknown>;
}

/** One row of step history as the mirror stores it. */
export interface StepRecord {
  stepId: string;
  position: number;
  kind: 'agent' | 'human';
  status: 'pending' | 'completed' | 'expired' | 'cancelled';
  resultData: Record<string, unknown> | null;
  completedBy: Actor | null;
  /** Completed steps: who it was, when the completion named them. */
  completer?: StepCompleter;
  startedAt: string;
  remindAt: string | null;
  expiresAt: string;
  reminders: number;
  completedAt: string | null;
  /** Human steps: the person's decision and note. */
  decision?: Decision | null;
  note?: string | null;
  /** An agent step run again because a person requested changes: their note. */
  feedback?: { fromStepId: string; note: string } | null;
}

/** What one workflow transition changes: the session row, step rows and the events to append. */
export interface SessionChange {
  input: Pick<CookbookSessionInput, 'sessionId' | 'accountId' | 'cookbookId' | 'selectedApis' | 'idempotencyKey'>;
  session: SessionSnapshot;
  endedAt: string | null;
  steps: StepRecord[];
  events: SessionEvent[];
  /** Append the events only (the session can no longer be mirrored in Postgres). */
  eventsOnly: boolean;
}

/**
 * The activities the session workflow calls, declared here beside the messages so the workflow
 * depends on no worker code; workers/temporal/activities.ts implements this interface.
 */
export interface SessionActivities {
  /** Records one transition: the Postgres mirror, then the events on the session's Redis stream. Idempotent. */
  recordSessionChange(change: SessionChange): Promise<void>;
}
