import { useEffect, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime } from '../format';
import { useSession } from '../session';
import { Badge, Card, ConfirmButton, CopyButton, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/** A webhook endpoint, as GET /api/v1/webhooks lists it (never with its secret). */
export type WebhookEndpoint = Answer<'/api/v1/webhooks'>['webhooks'][number];

/** One delivery of one event to one endpoint, as GET /api/v1/webhooks/{id}/deliveries lists it. */
export type Delivery = Answer<'/api/v1/webhooks/{id}/deliveries'>['deliveries'][number];

type DeliveriesPage = Pick<Answer<'/api/v1/webhooks/{id}/deliveries'>, 'deliveries' | 'nextCursor'>;

/** An event type an endpoint can listen to (the API's list, from the generated types). */
type EventType = WebhookEndpoint['eventTypes'][number];

const GROUPS = [
  { title: 'Money', column: 0 },
  { title: 'Human steps', column: 1 },
  { title: 'Connections', column: 1 },
  { title: 'Sessions', column: 2 },
  { title: 'Keys', column: 3 },
  { title: 'Tests', column: 3 },
] as const;

/**
 * Each event type described for people, in its group. A Record over the API's event types: a type
 * the API adds (or drops) fails the typecheck until it is described here.
 */
const EVENT_TYPES: Record<EventType, { group: (typeof GROUPS)[number]['title']; description: string }> = {
  'balance.low': { group: 'Money', description: 'The balance fell below your low-balance alert threshold.' },
  'balance.depleted': { group: 'Money', description: 'The balance reached zero, or a call was refused for lack of funds.' },
  'topup.succeeded': { group: 'Money', description: 'A top-up was credited to the balance.' },
  'topup.failed': { group: 'Money', description: 'A top-up payment did not go through.' },
  'human_step.pending': { group: 'Human steps', description: 'A session waits for a person to complete a step.' },
  'human_step.reminder': { group: 'Human steps', description: 'A step is still waiting: a reminder.' },
  'human_step.rejected': { group: 'Human steps', description: 'A person rejected a step.' },
  'human_step.changes_requested': { group: 'Human steps', description: 'A person sent a step back to the agent with changes to make.' },
  'session.completed': { group: 'Sessions', description: 'A cookbook session finished.' },
  'session.failed': { group: 'Sessions', description: 'A cookbook session failed.' },
  'session.expired': { group: 'Sessions', description: 'A cookbook session ran out of time.' },
  'connection.requested': { group: 'Connections', description: 'An agent asks a person to connect an API, saying what for.' },
  'connection.request_resolved': {
    group: 'Connections',
    description: 'A connection request ended: connected, declined, cancelled by the agent, or expired.',
  },
  'connection.refresh_failed': {
    group: 'Connections',
    description: 'An OAuth connection stopped working (the provider refused to renew its access): a person must reconnect it.',
  },
  'connection.recovered': { group: 'Connections', description: 'An OAuth connection that needed reconnecting works again.' },
  'key.revoked': { group: 'Keys', description: 'An API key or agent key was revoked.' },
  'webhook.test': { group: 'Tests', description: 'A test event sent from this page or the API (test events arrive whatever you pick).' },
};

/** The groups laid out in columns (the short ones share the last), each with its event types. */
const EVENT_COLUMNS = [0, 1, 2, 3].map((column) =>
  GROUPS.filter((group) => group.column === column).map((group) => ({
    title: group.title,
    types: (Object.keys(EVENT_TYPES) as EventType[])
      .filter((type) => EVENT_TYPES[type].group === group.title)
      .map((type) => ({ type, description: EVENT_TYPES[type].description })),
  })),
);

const DELIVERY_STATUS = {
  succeeded: { label: 'Succeeded', tone: 'green' },
  failed: { label: 'Failed', tone: 'red' },
  pending: { label: 'Pending', tone: 'amber' },
} as const;

/** A page of the delivery log. */
const LOG_PAGE = 20;

/** The reason an account gives itself when it disables an endpoint (anything else means deliveries kept failing). */
const DISABLED_BY_ACCOUNT = 'disabled by the account';

const endpointName = (endpoint: WebhookEndpoint) => endpoint.description || endpoint.url;

/** A signing secret, shown in full this one time, with a copy button and how to verify deliveries with it. */
function SecretReveal({ secret, label, children, onDone }: { secret: string; label: string; children?: ReactNode; onDone: () => void }) {
  return (
    <div className="key-reveal" role="region" aria-label={label}>
      <p className="key-reveal-warning">
        <strong>Copy this signing secret now.</strong> It won't be shown again: the platform keeps it only to sign deliveries and cannot show it to
        you later.
      </p>
      <div className="key-reveal-row">
        <code className="key-full" data-testid="webhook-secret">
          {secret}
        </code>
        <CopyButton text={secret} label="Copy secret" />
      </div>
      {children}
      <p className="small">
        To verify a delivery, check its Standard Webhooks headers <code>webhook-id</code>, <code>webhook-timestamp</code> and{' '}
        <code>webhook-signature</code> against the raw body with this secret, e.g. <code>new Webhook(secret).verify(rawBody, headers)</code> from the{' '}
        <code>standardwebhooks</code> package, and ignore a <code>webhook-id</code> you have already handled (retries carry the same one).
      </p>
      <button type="button" className="button button-small" onClick={onDone}>
        I have stored it — hide the secret
      </button>
    </div>
  );
}

function EventTypeChoice({ selected, onChange }: { selected: Set<EventType>; onChange: (next: Set<EventType>) => void }) {
  const toggle = (type: EventType, on: boolean) => {
    const next = new Set(selected);
    if (on) next.add(type);
    else next.delete(type);
    onChange(next);
  };
  return (
    <fieldset className="event-types">
      <legend className="field-label">Event types (at least one)</legend>
      <div className="event-groups">
        {EVENT_COLUMNS.map((column) => (
          <div key={column[0]!.title} className="event-column">
            {column.map((group) => (
              <fieldset key={group.title} className="event-group">
                <legend>{group.title}</legend>
                {group.types.map(({ type, description }) => (
                  <label key={type} className="event-choice">
                    <input type="checkbox" checked={selected.has(type)} onChange={(e) => toggle(type, e.target.checked)} />
                    <span>
                      <code>{type}</code>
                      <span className="field-help">{description}</span>
                    </span>
                  </label>
                ))}
              </fieldset>
            ))}
          </div>
        ))}
      </div>
    </fieldset>
  );
}

/**
 * What the URL field accepts, said plainly: https on a public host; on a test or development setup
 * (the server says whether this is one) also http and local addresses, for trying webhooks on one's own machine.
 */
function urlHelp(localUrlsAccepted: boolean | undefined): string {
  const always = 'Each event arrives as a signed POST with a JSON body.';
  if (localUrlsAccepted) {
    return `Use https on a public host. This service runs as a test or development setup, so it also accepts http and local addresses such as http://localhost:8080/hooks, to try webhooks on your own computer; a production service refuses them, so events never travel unencrypted or to a machine only you can reach. ${always}`;
  }
  return `Must be https on a public host, so events travel encrypted to an address the service can reach. ${always}`;
}

function AddEndpoint({ onAdded, localUrlsAccepted }: { onAdded: () => void; localUrlsAccepted: boolean | undefined }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<Set<EventType>>(new Set());
  const [created, setCreated] = useState<{ secret: string; url: string } | null>(null);
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    await run(async () => {
      if (types.size === 0) throw new Error('Choose at least one event type for the endpoint to receive.');
      const answer = await call(
        client.POST('/api/v1/webhooks', {
          body: { url: url.trim(), eventTypes: [...types], ...(description.trim() ? { description: description.trim() } : {}) },
        }),
      );
      setCreated({ secret: answer.secret, url: answer.webhook.url });
      setUrl('');
      setDescription('');
      setTypes(new Set());
      onAdded();
    });
  };
  return (
    <>
      <form className="webhook-form" onSubmit={submit}>
        <div className="form-grid">
          <label className="field">
            <span className="field-label">Endpoint URL</span>
            <input
              type="url"
              name="url"
              autoComplete="off"
              value={url}
              onChange={(e) => setUrl(e.target.value)}
              required
              maxLength={2000}
              placeholder="https://example.com/hooks/service"
            />
            <span className="field-help" data-testid="webhook-url-help">
              {urlHelp(localUrlsAccepted)}
            </span>
          </label>
          <label className="field">
            <span className="field-label">
              Description <span className="optional">(optional)</span>
            </span>
            <input
              name="description"
              autoComplete="off"
              value={description}
              onChange={(e) => setDescription(e.target.value)}
              maxLength={200}
              placeholder="e.g. billing alerts to Slack"
            />
          </label>
        </div>
        <EventTypeChoice selected={types} onChange={setTypes} />
        <div className="form-actions">
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Adding…' : 'Add endpoint'}
          </button>
        </div>
      </form>
      <ErrorMessage error={error} />
      {created && (
        <SecretReveal secret={created.secret} label="Signing secret of the new endpoint" onDone={() => setCreated(null)}>
          <p>
            The endpoint <code className="mono">{created.url}</code> was added. Its deliveries are signed with this secret.
          </p>
        </SecretReveal>
      )}
    </>
  );
}

/** What the receiver last answered (or why nothing reached it). */
function lastAnswer(delivery: Delivery): string {
  if (delivery.lastError) return delivery.lastError;
  if (delivery.lastStatusCode !== null) return `HTTP ${delivery.lastStatusCode}`;
  return '—';
}

function DeliveryRow({ endpoint, delivery, onRetried }: { endpoint: WebhookEndpoint; delivery: Delivery; onRetried: (delivery: Delivery) => void }) {
  const { busy, error, run } = useAction();
  const status = DELIVERY_STATUS[delivery.status];
  const at = delivery.lastAttemptAt ?? delivery.createdAt;
  return (
    <tr data-testid="delivery-row">
      <td>
        <code>{delivery.eventType}</code>
      </td>
      <td>
        <Badge tone={status.tone}>{status.label}</Badge>
      </td>
      <td className="num" data-testid="delivery-attempts">
        {delivery.attempts}
      </td>
      <td className="delivery-answer" data-testid="delivery-answer">
        {lastAnswer(delivery)}
        <ErrorMessage error={error} />
      </td>
      <td>
        <time dateTime={at} title={at}>
          {formatDateTime(at)}
        </time>
      </td>
      <td>
        <button
          type="button"
          className="button button-small"
          disabled={busy || delivery.status === 'pending' || endpoint.status !== 'enabled'}
          title={delivery.status === 'pending' ? 'Still being delivered' : endpoint.status !== 'enabled' ? 'Enable the endpoint to retry' : undefined}
          aria-label={`Retry the ${delivery.eventType} delivery of ${formatDateTime(delivery.createdAt)}`}
          onClick={() =>
            void run(async () => {
              const answer = await call(
                client.POST('/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry', {
                  params: { path: { id: endpoint.id, deliveryId: delivery.id } },
                }),
              );
              onRetried(answer.delivery);
            })
          }
        >
          {busy ? 'Retrying…' : 'Retry'}
        </button>
      </td>
    </tr>
  );
}

/**
 * An endpoint's delivery log, newest first: the first page from the server on open and on Refresh
 * (or when `refreshKey` changes), older pages added with "Load more". Refresh also calls
 * `onRefresh`, which reloads the endpoint list.
 */
function DeliveryLog({ endpoint, refreshKey, onRefresh }: { endpoint: WebhookEndpoint; refreshKey: number; onRefresh: () => void }) {
  const { expired } = useSession();
  const deliveries = (query: { limit: number; cursor?: string }, signal?: AbortSignal) =>
    client.GET('/api/v1/webhooks/{id}/deliveries', { params: { path: { id: endpoint.id }, query }, signal });
  const first = useApi(JSON.stringify(['deliveries', endpoint.id]), (signal) => deliveries({ limit: LOG_PAGE }, signal), expired);
  const [older, setOlder] = useState<DeliveriesPage | null>(null);
  /** Rows changed here since the last load (a retry answers the delivery as pending again). */
  const [changed, setChanged] = useState<Record<string, Delivery>>({});
  const [message, setMessage] = useState<string | null>(null);
  const more = useAction();
  const { reload } = first;

  // A fresh first page starts the log over: older pages and local changes are dropped.
  useEffect(() => {
    setOlder(null);
    setChanged({});
  }, [first.data]);
  const seenKey = useRef(refreshKey);
  useEffect(() => {
    if (seenKey.current === refreshKey) return;
    seenKey.current = refreshKey;
    reload();
  }, [refreshKey, reload]);

  const rows = [...(first.data?.deliveries ?? []), ...(older?.deliveries ?? [])].map((delivery) => changed[delivery.id] ?? delivery);
  const nextCursor = older ? older.nextCursor : (first.data?.nextCursor ?? null);
  // Refresh reloads the endpoint too: its status and last success change with its deliveries.
  const refresh = () => {
    setMessage(null);
    reload();
    onRefresh();
  };
  const loadMore = () =>
    more.run(async () => {
      if (!nextCursor) return;
      const page = await call(deliveries({ limit: LOG_PAGE, cursor: nextCursor }));
      setOlder((previous) => ({ deliveries: [...(previous?.deliveries ?? []), ...page.deliveries], nextCursor: page.nextCursor }));
    });

  return (
    <section className="delivery-log" aria-label={`Deliveries to ${endpointName(endpoint)}`} data-testid="delivery-log">
      <header className="delivery-log-header">
        <h3>Deliveries</h3>
        <button type="button" className="button button-small" onClick={refresh} disabled={first.loading}>
          {first.loading && first.data ? 'Refreshing…' : 'Refresh'}
        </button>
      </header>
      {endpoint.status !== 'enabled' && <p className="small muted">This endpoint is disabled: enable it to retry deliveries or send a test event.</p>}
      {message && (
        <p className="small" role="status">
          {message}
        </p>
      )}
      {first.loading && !first.data && <Spinner label="Loading deliveries" />}
      <ErrorMessage error={first.error} onRetry={reload} />
      {first.data && rows.length === 0 && (
        <Empty title="No deliveries yet">Send a test event, or wait for one of the event types it listens to.</Empty>
      )}
      {rows.length > 0 && (
        <div className="table-scroll">
          <table className="table delivery-table" aria-label={`Delivery log of ${endpointName(endpoint)}`}>
            <thead>
              <tr>
                <th scope="col">Event type</th>
                <th scope="col">Status</th>
                <th scope="col" className="num">
                  Attempts
                </th>
                <th scope="col">Last answer</th>
                <th scope="col">Time</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((delivery) => (
                <DeliveryRow
                  key={delivery.id}
                  endpoint={endpoint}
                  delivery={delivery}
                  onRetried={(retried) => {
                    setChanged((previous) => ({ ...previous, [retried.id]: retried }));
                    setMessage(`The ${retried.eventType} delivery is queued again, with the same webhook-id. Refresh to see how it went.`);
                  }}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ErrorMessage error={more.error} />
      {nextCursor && (
        <button type="button" className="button button-small" onClick={() => void loadMore()} disabled={more.busy}>
          {more.busy ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  );
}

function EndpointRow({ endpoint, onChanged, onMessage }: { endpoint: WebhookEndpoint; onChanged: () => void; onMessage: (message: string) => void }) {
  const { busy, error, run } = useAction();
  const [logOpen, setLogOpen] = useState(false);
  const [logVersion, setLogVersion] = useState(0);
  const [rotated, setRotated] = useState<{ secret: string; previousSecretValidUntil: string } | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const enabled = endpoint.status === 'enabled';
  const name = endpointName(endpoint);
  const failing = !enabled && endpoint.disabledReason !== null && endpoint.disabledReason !== DISABLED_BY_ACCOUNT;
  const logId = `deliveries-${endpoint.id}`;

  const setEnabled = (on: boolean) =>
    run(async () => {
      await call(client.PATCH('/api/v1/webhooks/{id}', { params: { path: { id: endpoint.id } }, body: { enabled: on } }));
      setNote(on ? 'Enabled: new events are delivered again.' : 'Disabled: nothing is sent to it until you enable it again.');
      onChanged();
    });

  return (
    <li className="key-item webhook-item" data-testid="webhook-row">
      <div className="key-main">
        <p className="key-name">
          <span className="mono">{endpoint.url}</span>{' '}
          <Badge tone={enabled ? 'green' : failing ? 'red' : 'amber'}>{enabled ? 'Enabled' : 'Disabled'}</Badge>
        </p>
        {endpoint.description && <p className="webhook-description">{endpoint.description}</p>}
        <p className="key-meta">
          {endpoint.eventTypes.map((type, index) => (
            <span key={type}>
              {index > 0 && ', '}
              <code>{type}</code>
            </span>
          ))}
        </p>
        <p className="key-meta">
          added {formatDateTime(endpoint.createdAt)} ·{' '}
          {endpoint.lastSuccessAt ? `last success ${formatDateTime(endpoint.lastSuccessAt)}` : 'no successful delivery yet'}
        </p>
        {!enabled && endpoint.disabledReason && !failing && <p className="key-meta">Disabled: {endpoint.disabledReason}.</p>}
        {failing && (
          <Notice tone="warning">
            <p data-testid="disabled-reason">
              <strong>Disabled after failing deliveries:</strong> {endpoint.disabledReason}
            </p>
            <p>Fix the receiver, then enable the endpoint; failed deliveries can be retried from its log.</p>
          </Notice>
        )}
        {note && (
          <p className="small" role="status">
            {note}
          </p>
        )}
        <ErrorMessage error={error} />
      </div>
      <div className="key-actions">
        <button
          type="button"
          className="button button-small"
          disabled={busy || !enabled}
          title={enabled ? undefined : 'Enable the endpoint to send a test event'}
          aria-label={`Send test event to ${name}`}
          onClick={() =>
            void run(async () => {
              await call(client.POST('/api/v1/webhooks/{id}/test', { params: { path: { id: endpoint.id } } }));
              setNote('Test event queued: see it in the delivery log.');
              setLogOpen(true);
              setLogVersion((v) => v + 1);
            })
          }
        >
          Send test event
        </button>
        <button
          type="button"
          className="button button-small"
          aria-expanded={logOpen}
          aria-controls={logOpen ? logId : undefined}
          onClick={() => setLogOpen((open) => !open)}
          aria-label={`${logOpen ? 'Hide deliveries' : 'Deliveries'} of ${name}`}
        >
          {logOpen ? 'Hide deliveries' : 'Deliveries'}
        </button>
        <button
          type="button"
          className="button button-small"
          disabled={busy}
          onClick={() => void setEnabled(!enabled)}
          aria-label={`${enabled ? 'Disable' : 'Enable'} ${name}`}
        >
          {enabled ? 'Disable' : 'Enable'}
        </button>
        <ConfirmButton
          label="Rotate secret"
          confirmLabel="Yes, rotate"
          question={`Rotate the signing secret of ${name}? You get a new secret now; the old one keeps working for 24 hours.`}
          onConfirm={() =>
            run(async () => {
              const answer = await call(client.POST('/api/v1/webhooks/{id}/rotate-secret', { params: { path: { id: endpoint.id } } }));
              setRotated(answer);
            })
          }
        />
        <ConfirmButton
          label="Delete"
          confirmLabel="Delete for good"
          question={`Delete ${name}? Nothing more is sent to it, and its delivery log is deleted too.`}
          onConfirm={() =>
            run(async () => {
              await call(client.DELETE('/api/v1/webhooks/{id}', { params: { path: { id: endpoint.id } } }));
              onMessage(`The endpoint ${endpoint.url} was deleted.`);
              onChanged();
            })
          }
        />
      </div>
      {rotated && (
        <div className="webhook-wide">
          <SecretReveal secret={rotated.secret} label={`New signing secret of ${name}`} onDone={() => setRotated(null)}>
            <p>
              This is the new secret of <code className="mono">{endpoint.url}</code>. The old one keeps working for 24 hours (until{' '}
              {formatDateTime(rotated.previousSecretValidUntil)}): until then each delivery carries two signatures, one per secret, so switch your
              receiver to the new secret before that.
            </p>
          </SecretReveal>
        </div>
      )}
      {logOpen && (
        <div className="webhook-wide" id={logId}>
          <DeliveryLog endpoint={endpoint} refreshKey={logVersion} onRefresh={onChanged} />
        </div>
      )}
    </li>
  );
}

/** The owner's page for outgoing webhooks: add endpoints, see and retry their deliveries, rotate secrets. */
export function WebhooksPage() {
  const { expired } = useSession();
  const webhooks = useApi('webhooks', (signal) => client.GET('/api/v1/webhooks', { signal }), expired);
  const [message, setMessage] = useState<string | null>(null);
  const list = webhooks.data?.webhooks ?? [];

  return (
    <>
      <PageHeader
        title="Webhooks"
        description="Get a signed HTTP POST at your own URL when something happens on this account: money, human steps, sessions and keys. A delivery that fails is retried for about two days; an endpoint that keeps failing is disabled and you get an e-mail."
      />
      {message && <Notice tone="success">{message}</Notice>}
      <Card title="Add an endpoint">
        <AddEndpoint
          localUrlsAccepted={webhooks.data?.localUrlsAccepted}
          onAdded={() => {
            setMessage(null);
            webhooks.reload();
          }}
        />
      </Card>
      <Card title="Endpoints">
        {webhooks.loading && !webhooks.data && <Spinner label="Loading endpoints" />}
        <ErrorMessage error={webhooks.error} onRetry={webhooks.reload} />
        {webhooks.data && list.length === 0 && <Empty title="No endpoints yet">Add one above to receive this account's events.</Empty>}
        {list.length > 0 && (
          <ul className="key-list" aria-label="Webhook endpoints">
            {list.map((endpoint) => (
              <EndpointRow key={endpoint.id} endpoint={endpoint} onChanged={webhooks.reload} onMessage={setMessage} />
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}
