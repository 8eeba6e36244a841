import { useCallback, useEffect, useRef, useState } from 'react';
import { call, client, isUnauthenticated } from '../api';
import { formatDateTime, formatRelative } from '../format';
import { useInterval, useSessionStreams } from '../live';
import { StepContext } from '../context-view';
import { Markdown } from '../markdown';
import { Link, useLocation } from '../router';
import { SchemaForm, type ObjectSchema } from '../schema-form';
import { useSession, type Account, type Person } from '../session';
import type { HumanStep, Session } from '../sessions-data';
import { Badge, Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';
import type { Member } from './Approvers';
import { ConnectRequestsSection } from './ConnectRequests';
import { WAITING_STEPS_EVENT } from '../waiting';

/** Completes a human step as the signed-in person (the cookie); the server validates resultData against the schema. */
export async function completeHumanStep(
  sessionId: string,
  stepId: string,
  resultData: Record<string, unknown>,
  decision?: { decision: 'reject' | 'request_changes'; note: string },
): Promise<void> {
  const body = decision
    ? { stepId, resultData, decision: decision.decision, ...(decision.note ? { note: decision.note } : {}) }
    : { stepId, resultData };
  await call(client.POST('/api/v1/cookbooks/sessions/{sessionId}/complete-step', { params: { path: { sessionId } }, body }));
}

/** Rejecting or sending the step back, with a note; shown only when the cookbook offers it. */
function DecisionPanel({ step, onDecided }: { step: HumanStep; onDecided: (message: string) => void }) {
  const [note, setNote] = useState('');
  const { busy, error, run } = useAction();
  const { reject, requestChanges } = step.decisions;
  if (!reject && !requestChanges) return null;
  const noteId = `note-${step.sessionId}-${step.stepId}`;
  const decide = (decision: 'reject' | 'request_changes', message: string) =>
    run(async () => {
      await completeHumanStep(step.sessionId, step.stepId, {}, { decision, note: note.trim() });
      onDecided(message);
    });
  return (
    <section className="decision-panel" aria-label="Other decisions" data-testid="decision-panel">
      <h3 className="eyebrow">Not as it is?</h3>
      <div className="field">
        <label htmlFor={noteId}>
          Your note to the agent <span className="muted">{requestChanges ? '(required to request changes)' : '(optional)'}</span>
        </label>
        <textarea id={noteId} rows={2} maxLength={2000} value={note} onChange={(event) => setNote(event.target.value)} />
      </div>
      <div className="button-row">
        {requestChanges && (
          <button
            type="button"
            className="button"
            disabled={busy || note.trim() === ''}
            title={note.trim() === '' ? 'Write a note saying what to change' : undefined}
            onClick={() => decide('request_changes', `Changes requested: the session goes back to “${requestChanges.title}”.`)}
          >
            Request changes
          </button>
        )}
        {reject && (
          <button
            type="button"
            className="button button-danger-outline"
            disabled={busy}
            onClick={() => decide('reject', `“${step.title}” was rejected. The session ends without the remaining steps.`)}
          >
            Reject
          </button>
        )}
      </div>
      <ErrorMessage error={error} />
    </section>
  );
}

/** Who a step is for, from the reader's side. */
function assigneeText(assignee: Person | null, account: Account): string {
  if (!assignee) return 'Any approver can take this';
  if (account.member && assignee.id === account.member.id) return 'Assigned to you';
  return `Assigned to ${assignee.email}`;
}

/**
 * The owner's choice of who takes a step: the first taker, or one active approver. It PUTs at once;
 * the card shows the choice while the call runs and goes back if it fails.
 */
function AssigneeSelect({
  step,
  assignee,
  approvers,
  onChange,
  onSaved,
}: {
  step: HumanStep;
  assignee: Person | null;
  approvers: Member[];
  onChange: (assignee: Person | null) => void;
  onSaved?: () => void;
}) {
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState<string | null>(null);
  const selectId = `assignee-${step.sessionId}-${step.stepId}`;
  const active = approvers.filter((member) => member.status === 'active');
  const assign = (memberId: string) =>
    run(async () => {
      const before = assignee;
      setSaved(null);
      const chosen = active.find((member) => member.id === memberId);
      onChange(chosen ? { id: chosen.id, email: chosen.email } : null);
      try {
        const body = await call(
          client.PUT('/api/v1/cookbooks/sessions/{sessionId}/steps/{stepId}/assignee', {
            params: { path: { sessionId: step.sessionId, stepId: step.stepId } },
            body: { memberId: chosen ? chosen.id : null },
          }),
        );
        onChange(body.assignee);
        setSaved(
          body.assignee
            ? `Saved: ${body.assignee.email} takes this step; other approvers no longer see it.`
            : 'Saved: any approver can take this step.',
        );
        onSaved?.();
      } catch (caught) {
        onChange(before);
        throw caught;
      }
    });
  return (
    <div className="assignee-select">
      <div className="field field-inline">
        <label className="field-label" htmlFor={selectId}>
          Assigned to
        </label>
        <select id={selectId} value={assignee?.id ?? ''} disabled={busy} onChange={(event) => void assign(event.target.value)}>
          <option value="">First taker (anyone)</option>
          {active.map((member) => (
            <option key={member.id} value={member.id}>
              {member.email}
            </option>
          ))}
          {assignee && !active.some((member) => member.id === assignee.id) && <option value={assignee.id}>{assignee.email}</option>}
        </select>
        <span className="small muted" role="status" data-testid="assignee-saved">
          {saved}
        </span>
      </div>
      <ErrorMessage error={error} />
    </div>
  );
}

export function HumanStepCard({
  step,
  onCompleted,
  showSession = true,
  approvers,
  targeted = false,
  onAssigned,
}: {
  step: HumanStep;
  onCompleted: (step: HumanStep, message?: string) => void;
  showSession?: boolean;
  /** The owner's approvers (GET /members): with an active one, the card offers to assign the step. Undefined while unknown, and for approvers. */
  approvers?: Member[];
  /** The step a link (…?session=…&step=…) points to: scrolled to, focused and highlighted. */
  targeted?: boolean;
  /** After the owner assigned the step. */
  onAssigned?: () => void;
}) {
  const { account } = useSession();
  const overdue = step.expiresAt !== null && new Date(step.expiresAt).getTime() < Date.now();
  // The assignee the owner just chose, until the inbox's next answer says otherwise ("basis" is the
  // assignee that answer had when the choice was made).
  const serverAssignee = step.assignee?.id ?? null;
  const [chosen, setChosen] = useState<{ basis: string | null; assignee: Person | null } | null>(null);
  const assignee = chosen && chosen.basis === serverAssignee ? chosen.assignee : step.assignee;
  const canAssign = account.role === 'owner' && approvers !== undefined && approvers.some((member) => member.status === 'active');
  // The owner's select says who takes the step; an owner without approvers has nobody to share it
  // with, so nothing is said until the list of approvers shows someone.
  const showAssignee = account.role === 'approver' || (!canAssign && (assignee !== null || (approvers !== undefined && approvers.length > 0)));
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    if (!targeted) return;
    ref.current?.scrollIntoView({ block: 'start' });
    ref.current?.focus({ preventScroll: true });
  }, [targeted]);

  return (
    <article
      ref={ref}
      tabIndex={-1}
      className={`card human-step ${targeted ? 'human-step-target' : ''}`}
      data-testid="human-step"
      aria-labelledby={`step-${step.sessionId}-${step.stepId}`}
    >
      <header className="human-step-header">
        <div>
          <p className="eyebrow">{step.cookbookTitle}</p>
          <h2 id={`step-${step.sessionId}-${step.stepId}`}>{step.title}</h2>
          <p className="muted small">
            {showSession && (
              <>
                Session <Link href={`/sessions/${encodeURIComponent(step.sessionId)}`}>{step.sessionId}</Link> ·{' '}
              </>
            )}
            waiting since {formatDateTime(step.pendingSince)}
            {step.reminders > 0 ? ` · ${step.reminders} reminder${step.reminders === 1 ? '' : 's'} sent` : ''}
          </p>
          {showAssignee && (
            <p className="step-assignee" data-testid="step-assignee">
              {assigneeText(assignee, account)}
            </p>
          )}
        </div>
        {step.expiresAt ? (
          <Badge tone={overdue ? 'red' : 'amber'}>
            <time dateTime={step.expiresAt} title={formatDateTime(step.expiresAt)}>
              Due {formatRelative(step.expiresAt)}
            </time>
          </Badge>
        ) : (
          <Badge tone="grey">No due time</Badge>
        )}
      </header>
      {canAssign && (
        <AssigneeSelect
          step={step}
          assignee={assignee}
          approvers={approvers ?? []}
          onChange={(next) => setChosen({ basis: serverAssignee, assignee: next })}
          onSaved={onAssigned}
        />
      )}
      {step.changesRequested && (
        <div className="alert alert-warning" data-testid="changes-requested">
          <p>
            <strong>Back after a request for changes.</strong> The note sent with it to “{step.changesRequested.title}”:
          </p>
          <blockquote className="step-note">{step.changesRequested.note}</blockquote>
          <p className="small">Check that the changes were made before you decide again.</p>
        </div>
      )}
      <Markdown source={step.instructions} />
      <StepContext context={step.context} />
      <SchemaForm
        schema={step.inputSchema as ObjectSchema}
        submitLabel="Complete step"
        onSubmit={async (resultData) => {
          await completeHumanStep(step.sessionId, step.stepId, resultData);
          onCompleted(step);
        }}
      />
      <DecisionPanel step={step} onDecided={(message) => onCompleted(step, message)} />
    </article>
  );
}

/**
 * Every pending human step of the account. It follows the event stream of each active session, so
 * steps appear and disappear without a reload; the list of active sessions is re-read every few
 * seconds to notice sessions started elsewhere (by an agent) after the page opened.
 */
export function InboxPage() {
  const { expired, account } = useSession();
  const { search } = useLocation();
  const inbox = useApi('me/human-steps', (signal) => client.GET('/api/v1/me/human-steps', { signal }), expired);
  // The owner's approvers, read once per visit, for the "Assigned to" choice on each card.
  const members = useApi(account.role === 'owner' ? 'members' : null, (signal) => client.GET('/api/v1/members', { signal }), expired);
  const [active, setActive] = useState<Session[]>([]);
  const [done, setDone] = useState<string | null>(null);
  // Connection requests are the owner's to answer (connecting is managing the account); null until known.
  const [connectCount, setConnectCount] = useState<number | null>(account.role === 'owner' ? null : 0);
  const reloadTimer = useRef<number | null>(null);
  const { reload } = inbox;

  const refreshSessions = useCallback(() => {
    call(client.GET('/api/v1/cookbooks/sessions', { params: { query: { limit: 200 } } }))
      .then((body) => setActive(body.sessions))
      .catch((error: unknown) => {
        // A removed approver (or an ended session) finds out within one refresh.
        if (isUnauthenticated(error)) void expired();
      });
  }, [expired]);
  useEffect(refreshSessions, [refreshSessions]);
  useInterval(refreshSessions, 5000);

  const scheduleReload = useCallback(() => {
    if (reloadTimer.current !== null) window.clearTimeout(reloadTimer.current);
    reloadTimer.current = window.setTimeout(reload, 150);
  }, [reload]);
  useEffect(
    () => () => {
      if (reloadTimer.current !== null) window.clearTimeout(reloadTimer.current);
    },
    [],
  );

  const sessionIds = [...active.map((s) => s.sessionId), ...(inbox.data?.humanSteps.map((s) => s.sessionId) ?? [])];
  const streams = useSessionStreams(sessionIds, (event) => {
    if (event.name.startsWith('human_step.') || event.name.startsWith('session.')) scheduleReload();
    if (event.name.startsWith('session.') && event.name !== 'session.started') refreshSessions();
  });
  const liveCount = Object.values(streams).filter((state) => state === 'live').length;
  const steps = inbox.data?.humanSteps ?? [];
  // The Inbox badge in the top bar follows what this page has just read.
  const waitingCount = inbox.data?.humanSteps.length;
  useEffect(() => {
    if (waitingCount !== undefined) window.dispatchEvent(new CustomEvent(WAITING_STEPS_EVENT, { detail: waitingCount }));
  }, [waitingCount]);
  // A link from an e-mail names one step: /inbox?session=…&step=…
  const target = { sessionId: search.get('session'), stepId: search.get('step') };
  const isTarget = (step: HumanStep) => step.sessionId === target.sessionId && step.stepId === target.stepId;
  const targetGone = target.sessionId !== null && target.stepId !== null && inbox.data !== null && !steps.some(isTarget);

  return (
    <>
      <PageHeader
        title="Inbox"
        description={
          account.role === 'approver'
            ? `Steps of ${account.email}'s cookbook sessions that need a person: those assigned to you and those any approver can take. Complete them here; the agent running the session continues on its own.`
            : 'Cookbook steps and connection requests that need a person. Complete them here; the agent continues on its own.'
        }
        actions={
          <span className="live-indicator" aria-live="polite">
            <span className={`live-dot ${liveCount > 0 ? 'live-dot-on' : ''}`} aria-hidden="true" />
            {liveCount > 0 ? `Live: following ${liveCount} session${liveCount === 1 ? '' : 's'}` : 'Live updates on'}
          </span>
        }
      />
      {done && <Notice tone="success">{done}</Notice>}
      {targetGone && !done && (
        <Notice tone="warning">
          <p>
            The step your link points to is no longer waiting in your inbox: it was completed already
            {account.role === 'approver' ? ', or it is assigned to someone else' : ''}.{' '}
            <Link href={`/sessions/${encodeURIComponent(target.sessionId ?? '')}`}>See its session</Link>.
          </p>
        </Notice>
      )}
      {inbox.loading && !inbox.data && <Spinner label="Loading the inbox" />}
      <ErrorMessage error={inbox.error} onRetry={inbox.reload} />
      <ErrorMessage error={members.error} onRetry={members.reload} />
      {account.role === 'owner' && (
        <ConnectRequestsSection targetId={search.get('request')} search={search} expired={expired} onCount={setConnectCount} />
      )}
      {inbox.data && steps.length === 0 && connectCount === 0 && (
        <Card>
          <Empty title="Nothing needs you right now">
            Steps that need a person, and agents' requests to connect an API, appear here as soon as they are made — no need to reload.
          </Empty>
        </Card>
      )}
      <div className="stack" aria-live="polite">
        {steps.map((step) => (
          <HumanStepCard
            key={`${step.sessionId}:${step.stepId}`}
            step={step}
            approvers={members.data?.members}
            targeted={isTarget(step)}
            onAssigned={reload}
            onCompleted={(completed, message) => {
              setDone(message ?? `“${completed.title}” is complete. The session continues.`);
              reload();
            }}
          />
        ))}
      </div>
    </>
  );
}
