import { useCallback, useEffect, useState } from 'react';
import { ApiError, call, client } from '../api';
import { formatDateTime, formatRelative, statusLabel } from '../format';
import { useCoalesced, useInterval, useSessionStreams, type SessionEvent } from '../live';
import { Link } from '../router';
import { useSession } from '../session';
import { ContextValue } from '../context-view';
import { ACTIVE_STATUSES, type HumanStep, type Session } from '../sessions-data';
import { Badge, Card, Empty, ErrorMessage, PageHeader, Spinner, useApi } from '../ui';
import { HumanStepCard } from './Inbox';

const STATUS_TONE: Record<string, 'green' | 'grey' | 'red' | 'amber' | 'blue'> = {
  running: 'blue',
  waiting_for_human: 'amber',
  completed: 'green',
  failed: 'red',
  cancelled: 'grey',
  expired: 'red',
};

export function StatusBadge({ status }: { status: string }) {
  return <Badge tone={STATUS_TONE[status] ?? 'grey'}>{statusLabel(status)}</Badge>;
}

function Progress({ progress }: { progress: { completed: number; total: number } }) {
  return (
    <span className="progress">
      <progress max={Math.max(progress.total, 1)} value={progress.completed} aria-label={`${progress.completed} of ${progress.total} steps done`} />
      <span className="small muted">
        {progress.completed} of {progress.total} steps
      </span>
    </span>
  );
}

/** A session's workflow in the Temporal UI at `base` (an operator's tool). */
export function workflowUrl(base: string, sessionId: string): string {
  return `${base}/namespaces/default/workflows/cookbook-session-${encodeURIComponent(sessionId)}`;
}

function SessionTable({ sessions, label }: { sessions: (Session & { cookbookTitle?: string })[]; label: string }) {
  return (
    <div className="table-scroll">
      <table className="table" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Cookbook</th>
            <th scope="col">Status</th>
            <th scope="col">Progress</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {sessions.map((session) => (
            <tr key={session.sessionId} data-testid="session-row">
              <td>
                <Link href={`/sessions/${encodeURIComponent(session.sessionId)}`}>{session.cookbookTitle ?? session.cookbookId}</Link>
                <div className="small muted mono">{session.sessionId}</div>
              </td>
              <td>
                <StatusBadge status={session.status} />
              </td>
              <td>
                <Progress progress={session.progress} />
              </td>
              <td>{formatRelative(session.updatedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function SessionsPage() {
  const { expired } = useSession();
  const active = useApi(
    'sessions/active',
    (signal) => client.GET('/api/v1/cookbooks/sessions', { params: { query: { limit: 200 } }, signal }),
    expired,
  );
  // Ended sessions come from the server (status=ended), whichever browser or agent ran them.
  const recent = useApi(
    'sessions/ended',
    (signal) => client.GET('/api/v1/cookbooks/sessions', { params: { query: { status: 'ended', limit: 20 } }, signal }),
    expired,
  );
  useInterval(active.reload, 5000);
  useInterval(recent.reload, 15000);

  return (
    <>
      <PageHeader
        title="Sessions"
        description={
          <>
            Cookbook sessions: guided procedures your agents run step by step. <Link href="/cookbooks">See the cookbooks and start one</Link>.
          </>
        }
      />
      <Card title="Active">
        {active.loading && !active.data && <Spinner label="Loading sessions" />}
        <ErrorMessage error={active.error} onRetry={active.reload} />
        {active.data && active.data.sessions.length === 0 && (
          <Empty title="No active sessions">
            An agent starts one with its key, or you start one from the <Link href="/cookbooks">Cookbooks</Link> page.
          </Empty>
        )}
        {active.data && active.data.sessions.length > 0 && <SessionTable sessions={active.data.sessions} label="Active sessions" />}
      </Card>
      <Card title="Recent">
        {recent.loading && !recent.data && <Spinner label="Loading recent sessions" />}
        <ErrorMessage error={recent.error} onRetry={recent.reload} />
        {recent.data && recent.data.sessions.length === 0 && <Empty title="No ended sessions yet">Sessions stay listed here after they end.</Empty>}
        {recent.data && recent.data.sessions.length > 0 && <SessionTable sessions={recent.data.sessions} label="Recent sessions" />}
      </Card>
    </>
  );
}

const EVENT_TEXT: Record<string, string> = {
  'session.started': 'Session started',
  'step.started': 'Step started',
  'step.completed': 'Step completed',
  'human_step.pending': 'Waiting for a person',
  'human_step.reminder': 'Reminder sent',
  'human_step.completed': 'Completed by a person',
  'human_step.rejected': 'Rejected by a person',
  'human_step.changes_requested': 'Changes requested by a person',
  'session.completed': 'Session completed',
  'session.failed': 'Session failed',
  'session.expired': 'Session expired',
  'session.cancelled': 'Session cancelled',
};

/**
 * Who completed a step, in words: a person by their e-mail, an agent by the name of the key it used
 * ("by the key named “default”", not "by default").
 */
export function completerText(kind: string, name: string): string {
  return kind === 'human' || name.includes('@') ? `by ${name}` : `with the key named “${name}”`;
}

function eventSentence(event: SessionEvent): string {
  const title = typeof event.data.title === 'string' ? `: ${event.data.title}` : '';
  const reason = typeof event.data.reason === 'string' ? ` (${event.data.reason})` : '';
  return `${EVENT_TEXT[event.name] ?? event.name}${title}${reason}`;
}

export function SessionDetailPage({ sessionId }: { sessionId: string }) {
  const { expired, account } = useSession();
  const detail = useApi(
    JSON.stringify(['session', sessionId]),
    (signal) => client.GET('/api/v1/cookbooks/sessions/{sessionId}', { params: { path: { sessionId } }, signal }),
    expired,
  );
  // The owner may assign the waiting step here too, as in the inbox.
  const members = useApi(account.role === 'owner' ? 'members' : null, (signal) => client.GET('/api/v1/members', { signal }), expired);
  const [events, setEvents] = useState<(SessionEvent & { at: number })[]>([]);
  const [humanSteps, setHumanSteps] = useState<HumanStep[]>([]);
  const { reload } = detail;
  const session = detail.data?.session;

  const loadHumanSteps = useCallback(() => {
    call(client.GET('/api/v1/cookbooks/sessions/{sessionId}/human-steps', { params: { path: { sessionId } } }))
      .then((body) => setHumanSteps(body.humanSteps))
      .catch(() => setHumanSteps([]));
  }, [sessionId]);
  useEffect(loadHumanSteps, [loadHumanSteps]);
  // The stream replays the session's history when it opens: the burst re-reads the session (and its
  // human steps) once, not once per event, and live events later do the same.
  const reloadSoon = useCoalesced(reload, 200);
  const loadHumanStepsSoon = useCoalesced(loadHumanSteps, 200);

  const streams = useSessionStreams(detail.data ? [sessionId] : [], (event) => {
    setEvents((previous) => (previous.some((e) => e.id === event.id && event.id !== '') ? previous : [...previous, { ...event, at: Date.now() }]));
    reloadSoon();
    if (event.name.startsWith('human_step.') || event.name.startsWith('session.')) loadHumanStepsSoon();
  });
  const stream = streams[sessionId];
  // The Temporal UI link is an operator's tool: the server says whether this person is one.
  const tools = useApi('me/operator-tools', (signal) => client.GET('/api/v1/me/operator-tools', { signal }));
  const temporalUi = tools.data?.temporalUiUrl ?? null;
  const link = temporalUi ? workflowUrl(temporalUi, sessionId) : null;
  const notFound = detail.error instanceof ApiError && detail.error.status === 404;

  return (
    <>
      <PageHeader
        title={session?.cookbookTitle ?? 'Session'}
        description={
          <>
            Session <span className="mono">{sessionId}</span>
          </>
        }
        actions={
          // For operators only, and only for a session that exists (a mistyped address shows no link).
          link && session ? (
            <a className="button" href={link} target="_blank" rel="noreferrer noopener">
              Open workflow in Temporal UI
            </a>
          ) : null
        }
      />
      <p>
        <Link href="/sessions">← All sessions</Link>
      </p>
      {detail.loading && !detail.data && <Spinner label="Loading the session" />}
      {notFound ? (
        <Empty title="No such session">It does not exist or belongs to another account.</Empty>
      ) : (
        <ErrorMessage error={detail.error} onRetry={reload} />
      )}
      {session && (
        <>
          <Card title="Status">
            <dl className="facts">
              <div>
                <dt>Status</dt>
                <dd data-testid="session-status">
                  <StatusBadge status={session.status} /> {session.outcome === 'rejected' && <Badge tone="red">Rejected by a person</Badge>}
                </dd>
              </div>
              <div>
                <dt>Progress</dt>
                <dd>
                  <Progress progress={session.progress} />
                </dd>
              </div>
              <div>
                <dt>Started</dt>
                <dd>{formatDateTime(session.startedAt)}</dd>
              </div>
              <div>
                <dt>Updated</dt>
                <dd>{formatDateTime(session.updatedAt)}</dd>
              </div>
              <div>
                <dt>APIs</dt>
                <dd>
                  {Object.entries(session.selectedApis).length === 0
                    ? 'None'
                    : Object.entries(session.selectedApis).map(([slot, apiId]) => (
                        <span key={slot} className="chip">
                          {slot}:{' '}
                          {account.role === 'approver' ? (
                            <span className="mono">{apiId}</span>
                          ) : (
                            <Link href={`/directory/${encodeURIComponent(apiId)}`}>{apiId}</Link>
                          )}
                        </span>
                      ))}
                </dd>
              </div>
            </dl>
          </Card>
          {humanSteps.map((step) => (
            <HumanStepCard
              key={step.stepId}
              step={step}
              showSession={false}
              approvers={members.data?.members}
              onAssigned={loadHumanSteps}
              onCompleted={() => loadHumanSteps()}
            />
          ))}
          <Card title="Steps">
            <ol className="steps">
              {session.steps.map((step) => (
                <li key={step.stepId} className={`step step-${step.status}`} data-testid="session-step">
                  <span className="step-title">
                    {step.title} {step.kind === 'human' && <Badge tone="blue">Person</Badge>}
                  </span>
                  <span className="small muted" data-testid="step-outcome">
                    {step.decision === 'reject' ? 'Rejected' : step.decision === 'request_changes' ? 'Changes requested' : statusLabel(step.status)}
                    {step.completedByName ? ` ${completerText(step.kind, step.completedByName)}` : ''}
                    {step.completedAt ? ` · ${formatDateTime(step.completedAt)}` : ''}
                  </span>
                  {step.note && <span className="small step-note">“{step.note}”</span>}
                  {step.feedback && (
                    <span className="small step-note" data-testid="step-feedback">
                      Asked to change: “{step.feedback.note}”
                    </span>
                  )}
                  {step.resultData && (
                    <details className="step-result">
                      <summary>Result</summary>
                      <ContextValue value={step.resultData} />
                    </details>
                  )}
                </li>
              ))}
            </ol>
          </Card>
          <Card
            title="Event history"
            actions={
              <span className="small muted">
                {ACTIVE_STATUSES.has(session.status) ? (stream === 'live' ? 'Live' : 'Connecting…') : 'Session ended'}
              </span>
            }
          >
            {events.length === 0 ? (
              <Empty title="No events received yet" />
            ) : (
              <ol className="events" data-testid="session-events">
                {events.map((event, index) => (
                  <li key={`${event.id}-${index}`}>
                    <span>{eventSentence(event)}</span>
                  </li>
                ))}
              </ol>
            )}
          </Card>
        </>
      )}
    </>
  );
}
