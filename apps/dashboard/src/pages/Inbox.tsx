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
import { Badge, Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useApi } from '../ui';

/** Completes a human step as the signed-in person (the cookie); the server validates resultData against the schema. */
export async function completeHumanStep(sessionId: string, stepId: string, resultData: Record<string, unknown>): Promise<void> {
  await api(`/cookbooks/sessions/${encodeURIComponent(sessionId)}/complete-step`, { method: 'POST', body: { stepId, resultData } });
}

export function HumanStepCard({ step, onCompleted, showSession = true }: { step: HumanStep; onCompleted: (step: HumanStep) => void; showSession?: boolean }) {
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
            onCompleted={(completed) => {
              setDone(`“${completed.title}” is complete. The session continues.`);
              reload();
            }}
          />
        ))}
      </div>
    </>
  );
}
