import { useCallback, useEffect, useRef, useState } from 'react';
import { api } from '../api';
import { formatDateTime, formatRelative } from '../format';
import { useInterval, useSessionStreams } from '../live';
import { StepContext } from '../context-view';
import { Markdown } from '../markdown';
import { Link } from '../router';
import { SchemaForm, type ObjectSchema } from '../schema-form';
import { useSession } from '../session';
import type { HumanStep, Session } from '../sessions-data';
import { Badge, Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/** Completes a human step as the signed-in person (the cookie); the server validates resultData against the schema. */
export async function completeHumanStep(
  sessionId: string,
  stepId: string,
  resultData: Record<string, unknown>,
  decision?: { decision: 'reject' | 'request_changes'; note: string },
): Promise<void> {
  const body = decision ? { stepId, resultData, decision: decision.decision, ...(decision.note ? { note: decision.note } : {}) } : { stepId, resultData };
  await api(`/cookbooks/sessions/${encodeURIComponent(sessionId)}/complete-step`, { method: 'POST', body });
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
          <button type="button" className="button button-danger-outline" disabled={busy} onClick={() => decide('reject', `“${step.title}” was rejected. The session ends without the remaining steps.`)}>
            Reject
          </button>
        )}
      </div>
      <ErrorMessage error={error} />
    </section>
  );
}

export function HumanStepCard({
  step,
  onCompleted,
  showSession = true,
}: {
  step: HumanStep;
  onCompleted: (step: HumanStep, message?: string) => void;
  showSession?: boolean;
}) {
  const overdue = step.expiresAt !== null && new Date(step.expiresAt).getTime() < Date.now();
  return (
    <article className="card human-step" data-testid="human-step" aria-labelledby={`step-${step.sessionId}-${step.stepId}`}>
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
  const { expired } = useSession();
  const inbox = useApi<{ humanSteps: HumanStep[] }>('/me/human-steps', expired);
  const [active, setActive] = useState<Session[]>([]);
  const [done, setDone] = useState<string | null>(null);
  const reloadTimer = useRef<number | null>(null);
  const { reload } = inbox;

  const refreshSessions = useCallback(() => {
    api<{ sessions: Session[] }>('/cookbooks/sessions?limit=200')
      .then((body) => setActive(body.sessions))
      .catch(() => undefined);
  }, []);
  useEffect(refreshSessions, [refreshSessions]);
  useInterval(refreshSessions, 5000);

  const scheduleReload = useCallback(() => {
    if (reloadTimer.current !== null) window.clearTimeout(reloadTimer.current);
    reloadTimer.current = window.setTimeout(reload, 150);
  }, [reload]);
  useEffect(() => () => {
    if (reloadTimer.current !== null) window.clearTimeout(reloadTimer.current);
  }, []);

  const sessionIds = [...active.map((s) => s.sessionId), ...(inbox.data?.humanSteps.map((s) => s.sessionId) ?? [])];
  const streams = useSessionStreams(sessionIds, (event) => {
    if (event.name.startsWith('human_step.') || event.name.startsWith('session.')) scheduleReload();
    if (event.name.startsWith('session.') && event.name !== 'session.started') refreshSessions();
  });
  const liveCount = Object.values(streams).filter((state) => state === 'live').length;
  const steps = inbox.data?.humanSteps ?? [];

  return (
    <>
      <PageHeader
        title="Inbox"
        description="Cookbook steps that need a person. Complete them here; the agent running the session continues on its own."
        actions={
          <span className="live-indicator" aria-live="polite">
            <span className={`live-dot ${liveCount > 0 ? 'live-dot-on' : ''}`} aria-hidden="true" />
            {liveCount > 0 ? `Live: following ${liveCount} session${liveCount === 1 ? '' : 's'}` : 'Live updates on'}
          </span>
        }
      />
      {done && <Notice tone="success">{done}</Notice>}
      {inbox.loading && !inbox.data && <Spinner label="Loading the inbox" />}
      <ErrorMessage error={inbox.error} onRetry={inbox.reload} />
      {inbox.data && steps.length === 0 && (
        <Card>
          <Empty title="Nothing needs you right now">Steps that need a person appear here as soon as a session reaches them — no need to reload.</Empty>
        </Card>
      )}
      <div className="stack" aria-live="polite">
        {steps.map((step) => (
          <HumanStepCard
            key={`${step.sessionId}:${step.stepId}`}
            step={step}
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
