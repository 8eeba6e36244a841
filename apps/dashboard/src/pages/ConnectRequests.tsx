import { useEffect, useRef, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime, formatRelative } from '../format';
import { useInterval } from '../live';
import { Link } from '../router';
import type { SessionContextValue } from '../session';
import { Badge, ErrorMessage, Notice, useAction, useApi } from '../ui';
import { consentOutcome } from './Connections';

/** One connect request as GET /api/v1/connect/requests lists it. */
export type ConnectRequest = Answer<'/api/v1/connect/requests'>['requests'][number];

/**
 * Starts the OAuth consent flow for the request's API with the request's id, so the grant answers it,
 * and sends the browser to the provider; it comes back to the inbox.
 */
async function startOAuth(request: ConnectRequest): Promise<void> {
  const started = await call(
    client.POST('/api/v1/oauth/authorize', {
      body: {
        apiId: request.apiId,
        connectRequestId: request.id,
        returnTo: '/inbox',
        ...(request.scopes.length > 0 ? { scopes: request.scopes } : {}),
      },
    }),
  );
  window.location.assign(started.authorizationUrl);
}

/** The one step that answers a key API's request: the person's own key, stored by POST /connect/{api_id}. */
function KeyConnectForm({ request, onConnected }: { request: ConnectRequest; onConnected: () => void }) {
  const [apiKey, setApiKey] = useState('');
  const { busy, error, run } = useAction();
  const fieldId = `connect-request-key-${request.id}`;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => {
      await call(client.POST('/api/v1/connect/{apiId}', { params: { path: { apiId: request.apiId } }, body: { apiKey } }));
      // The key leaves the browser's memory as soon as the server has it.
      setApiKey('');
      onConnected();
    });
  };
  return (
    <form className="connect-request-form" onSubmit={submit}>
      <div className="field">
        <label className="field-label" htmlFor={fieldId}>
          Your key for {request.apiName}
        </label>
        <input
          id={fieldId}
          type="password"
          value={apiKey}
          onChange={(event) => setApiKey(event.target.value)}
          required
          autoComplete="off"
          aria-describedby={`${fieldId}-help`}
        />
        <span className="field-help" id={`${fieldId}-help`}>
          Stored encrypted and never shown to the agent; it calls the API through the platform with it.
        </span>
      </div>
      <div className="button-row">
        <button type="submit" className="button button-primary" disabled={busy || apiKey.trim() === ''}>
          Connect
        </button>
      </div>
      <ErrorMessage error={error} />
    </form>
  );
}

export function ConnectRequestCard({
  request,
  targeted,
  onAnswered,
}: {
  request: ConnectRequest;
  targeted: boolean;
  onAnswered: (message: string) => void;
}) {
  const decline = useAction();
  const oauth = useAction();
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    if (!targeted) return;
    ref.current?.scrollIntoView({ block: 'start' });
    ref.current?.focus({ preventScroll: true });
  }, [targeted]);
  const headingId = `connect-request-${request.id}`;
  return (
    <article
      ref={ref}
      tabIndex={-1}
      className={`card human-step connect-request ${targeted ? 'human-step-target' : ''}`}
      data-testid="connect-request"
      aria-labelledby={headingId}
    >
      <header className="human-step-header">
        <div>
          <p className="eyebrow">Connection request · {request.authKind === 'oauth' ? 'OAuth sign-in' : 'API key'}</p>
          <h2 id={headingId}>Connect {request.apiName}</h2>
          <p className="muted small">
            <Link href={`/directory/${encodeURIComponent(request.apiId)}`}>{request.apiId}</Link> · asked {formatDateTime(request.createdAt)}
          </p>
        </div>
        <Badge tone="amber">
          <time dateTime={request.expiresAt} title={formatDateTime(request.expiresAt)}>
            Expires {formatRelative(request.expiresAt)}
          </time>
        </Badge>
      </header>
      <p className="eyebrow">What the agent wants to do, and why</p>
      {/* The agent's own words, shown as plain text. */}
      <blockquote className="connect-request-purpose">{request.purpose}</blockquote>
      {request.scopes.length > 0 && (
        <p className="small">
          Access asked for: <code>{request.scopes.join(' ')}</code>
        </p>
      )}
      {request.authKind === 'oauth' ? (
        <div className="button-row">
          <button type="button" className="button button-primary" disabled={oauth.busy} onClick={() => void oauth.run(() => startOAuth(request))}>
            Connect with {request.oauthProvider ?? request.apiName}
          </button>
        </div>
      ) : (
        <KeyConnectForm request={request} onConnected={() => onAnswered(`${request.apiName} is connected. The agent can call it now.`)} />
      )}
      <ErrorMessage error={oauth.error} />
      <div className="button-row">
        <button
          type="button"
          className="button button-danger-outline"
          disabled={decline.busy}
          onClick={() =>
            void decline.run(async () => {
              await call(client.POST('/api/v1/connect/requests/{requestId}/decline', { params: { path: { requestId: request.id } } }));
              onAnswered(`You declined to connect ${request.apiName}. The agent is told.`);
            })
          }
        >
          Decline
        </button>
      </div>
      <ErrorMessage error={decline.error} />
    </article>
  );
}

/**
 * The account's pending connect requests, for the owner's inbox; re-read every few seconds so a
 * request an agent makes appears without a reload. A link from the e-mail (…?request=<id>) points at one.
 */
export function ConnectRequestsSection({
  targetId,
  search,
  expired,
  onCount,
}: {
  targetId: string | null;
  /** The inbox's query: `?oauth=...` is how a consent started from a request came back. */
  search: URLSearchParams;
  expired: SessionContextValue['expired'];
  /** Told how many requests wait, once known (the inbox is empty only when nothing waits at all). */
  onCount: (count: number) => void;
}) {
  const requests = useApi(
    'connect/requests?status=pending',
    (signal) => client.GET('/api/v1/connect/requests', { params: { query: { status: 'pending', limit: 200 } }, signal }),
    expired,
  );
  const target = useApi(targetId ? `connect/requests/${targetId}` : null, (signal) =>
    client.GET('/api/v1/connect/requests/{requestId}', { params: { path: { requestId: targetId ?? '' } }, signal }),
  );
  const [done, setDone] = useState<string | null>(null);
  const { reload } = requests;
  useInterval(reload, 5000);
  const pending = requests.data?.requests ?? [];
  const count = requests.data ? pending.length : null;
  useEffect(() => {
    if (count !== null) onCount(count);
  }, [count, onCount]);
  const answered = target.data && target.data.request.status !== 'pending' ? target.data.request : null;
  const consent = consentOutcome(search);
  return (
    <>
      {done && <Notice tone="success">{done}</Notice>}
      {consent && !done && (
        <Notice tone={consent.tone}>
          <p>{consent.tone === 'success' ? `${consent.text} The agent that asked can call it now.` : consent.text}</p>
        </Notice>
      )}
      {answered && !done && (
        <Notice tone="warning">
          <p>
            The connection request your link points to is no longer waiting: it is {answered.status}
            {answered.resolvedAt ? ` (${formatDateTime(answered.resolvedAt)})` : ''}.
          </p>
        </Notice>
      )}
      <ErrorMessage error={requests.error} onRetry={reload} />
      {pending.map((request) => (
        <ConnectRequestCard
          key={request.id}
          request={request}
          targeted={request.id === targetId}
          onAnswered={(message) => {
            setDone(message);
            reload();
          }}
        />
      ))}
    </>
  );
}
