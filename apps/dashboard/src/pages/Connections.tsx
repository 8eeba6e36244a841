import { useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime } from '../format';
import { Link, navigate, useLocation } from '../router';
import { useSession } from '../session';
import { Badge, Card, ConfirmButton, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

type OAuthConnection = Answer<'/api/v1/me/connections'>['connections'][number];

/** What the callback's `reason` means, for the person who just came back from the provider. */
const CONSENT_FAILURES: Record<string, string> = {
  access_denied: 'You declined at the provider, so nothing was connected.',
  invalid_state: 'That sign-in link was already used or is not one this dashboard started. Start again with "Connect".',
  expired: 'That sign-in took longer than 10 minutes. Start again with "Connect".',
  session_mismatch: 'You came back signed in as someone else (or signed out). Start again from this browser with "Connect".',
  provider_error: 'The provider refused the request.',
  exchange_failed: 'The provider did not accept the sign-in. Try again; if it keeps failing, the OAuth app registered for it may be misconfigured.',
  provider_unreachable: 'The provider could not be reached. Try again in a moment.',
  label_taken: 'You already have a connection with that label. Pick another label.',
  connection_gone: 'The connection being reconnected no longer exists.',
};

/** The sentence for the outcome a consent flow came back with (`?oauth=...` on this page or the inbox), or null. */
export function consentOutcome(search: URLSearchParams): { tone: 'success' | 'warning'; text: string } | null {
  const oauth = search.get('oauth');
  if (oauth === 'connected' || oauth === 'reconnected') return { tone: 'success', text: oauth === 'connected' ? 'Connected.' : 'Reconnected.' };
  if (oauth !== 'error') return null;
  const reason = search.get('reason') ?? '';
  const provider = search.get('provider');
  const providerError = search.get('providerError');
  const base = CONSENT_FAILURES[reason] ?? 'The connection did not complete.';
  const detail = reason === 'provider_error' && providerError ? ` (${providerError})` : '';
  return { tone: 'warning', text: `${provider ? `${provider}: ` : ''}${base}${detail}` };
}

/** Starts a consent flow and sends the browser to the provider; it comes back to this page. */
async function startConsent(body: { apiId?: string; provider?: string; label?: string; connectionId?: string }) {
  const started = await call(client.POST('/api/v1/oauth/authorize', { body }));
  window.location.assign(started.authorizationUrl);
}

function OAuthConnectForm() {
  const [target, setTarget] = useState('');
  const [label, setLabel] = useState('');
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const value = target.trim();
    // An API id has no port and no dots-only host shape we can tell apart reliably: a name with a port or
    // a typical authorization-server host is taken as a provider, anything else as an API id.
    const isProvider = /:\d+$/.test(value) || /^(accounts\.|login\.|auth\.|oauth\.)/.test(value);
    await run(() => startConsent({ ...(isProvider ? { provider: value } : { apiId: value }), ...(label.trim() ? { label: label.trim() } : {}) }));
  };
  return (
    <>
      <form className="form-grid" onSubmit={submit} aria-label="Connect with OAuth">
        <div className="field">
          <label className="field-label" htmlFor="oauth-api-id">
            API id or provider
          </label>
          <input
            id="oauth-api-id"
            value={target}
            onChange={(e) => setTarget(e.target.value)}
            required
            placeholder="e.g. googleapis.com-gmail"
            autoComplete="off"
            aria-describedby="oauth-api-id-help"
          />
          <span className="field-help" id="oauth-api-id-help">
            You sign in at the provider and choose what to allow; every API of that provider can then be called with it.
          </span>
        </div>
        <div className="field">
          <label className="field-label" htmlFor="oauth-label">
            Label (optional)
          </label>
          <input id="oauth-label" value={label} onChange={(e) => setLabel(e.target.value)} placeholder="e.g. work" autoComplete="off" />
          <span className="field-help">Tell several accounts at one provider apart; calls pick one with the X-Service-Connection header.</span>
        </div>
        <div className="form-actions">
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Opening the provider…' : 'Connect with OAuth'}
          </button>
        </div>
      </form>
      <ErrorMessage error={error} />
    </>
  );
}

function OAuthConnectionItem({ connection, onChanged }: { connection: OAuthConnection; onChanged: (notice: string) => void }) {
  const { busy, error, run } = useAction();
  const expires = connection.expiresAt
    ? `access renews automatically; current token until ${formatDateTime(connection.expiresAt)}`
    : 'no expiry given';
  return (
    <li className="key-item" data-connection={connection.id}>
      <div className="key-main">
        <p className="key-name">
          {connection.provider} · {connection.label}{' '}
          {connection.status === 'ready' ? <Badge tone="green">Ready</Badge> : <Badge tone="red">Needs reconnecting</Badge>}
          {connection.isDefault && <Badge tone="blue">Default</Badge>}
        </p>
        <p className="key-meta">
          {connection.grantType === 'client_credentials' ? 'Server to server' : 'Signed in'} · scopes{' '}
          {connection.scopes.length > 0 ? connection.scopes.map((scope) => <code key={scope}>{scope} </code>) : 'none'} · {expires}
        </p>
        {connection.statusReason && <p className="key-meta">{connection.statusReason}.</p>}
      </div>
      <div className="key-actions">
        {!connection.isDefault && (
          <button
            type="button"
            className="button"
            disabled={busy}
            onClick={() =>
              run(async () => {
                await call(client.PATCH('/api/v1/me/connections/{id}', { params: { path: { id: connection.id } }, body: { isDefault: true } }));
                onChanged(`${connection.label} is now the default for ${connection.provider}.`);
              })
            }
          >
            Make default
          </button>
        )}
        {connection.grantType === 'authorization_code' && (
          <button type="button" className="button" disabled={busy} onClick={() => run(() => startConsent({ connectionId: connection.id }))}>
            Reconnect
          </button>
        )}
        <ConfirmButton
          label="Disconnect"
          confirmLabel="Yes, disconnect"
          question={`Disconnect ${connection.label} at ${connection.provider}? The platform deletes its tokens and asks the provider to revoke them.`}
          onConfirm={() =>
            run(async () => {
              const { revocation } = await call(client.DELETE('/api/v1/me/connections/{id}', { params: { path: { id: connection.id } } }));
              onChanged(
                revocation === 'revoked'
                  ? `Disconnected ${connection.label}; the provider revoked its access.`
                  : `Disconnected ${connection.label}. ${revocation === 'failed' ? 'The provider could not be reached to revoke it: revoke the app in your account there.' : 'This provider offers no revocation: remove the app in your account there if you want it gone there too.'}`,
              );
            })
          }
        />
      </div>
      <ErrorMessage error={error} />
    </li>
  );
}

/**
 * The e-mail about a connection that stopped working links here with `?reconnect=<id>`: the
 * connection, why, and the one button that starts its consent flow again. A click, not an automatic
 * redirect: going to the provider is the person's decision, not a link's.
 */
function ReconnectPrompt({ id, connections }: { id: string; connections: OAuthConnection[] }) {
  const { busy, error, run } = useAction();
  const connection = connections.find((c) => c.id === id);
  const dismiss = (
    <button type="button" className="button button-small" onClick={() => navigate('/connections', { replace: true })}>
      Dismiss
    </button>
  );
  if (!connection) return <Notice tone="warning">That connection no longer exists: connect again below if you still need it. {dismiss}</Notice>;
  if (connection.status === 'ready') {
    return (
      <Notice tone="success">
        {connection.provider} · {connection.label} works again: nothing to do. {dismiss}
      </Notice>
    );
  }
  if (connection.grantType === 'client_credentials') {
    return (
      <Notice tone="warning">
        Your server-to-server connection <strong>{connection.label}</strong> to {connection.provider} stopped working: the provider refused your app's
        client credentials. Register your app again with its current secret, the way your program registered it first, then disconnect this connection
        and create it again. {dismiss}
      </Notice>
    );
  }
  return (
    <Notice tone="warning">
      <span role="region" aria-label="Reconnect a connection">
        Your connection <strong>{connection.label}</strong> to {connection.provider} stopped working
        {connection.statusReason ? `: ${connection.statusReason.charAt(0).toLowerCase()}${connection.statusReason.slice(1)}` : ''}. Calls through it
        are refused, and not charged, until you reconnect it.{' '}
        <button
          type="button"
          className="button button-primary button-small"
          disabled={busy}
          onClick={() => run(() => startConsent({ connectionId: connection.id }))}
        >
          {busy ? 'Opening the provider…' : `Reconnect ${connection.provider}`}
        </button>{' '}
        {dismiss}
      </span>
      <ErrorMessage error={error} />
    </Notice>
  );
}

function OAuthConnections() {
  const { expired } = useSession();
  const { search } = useLocation();
  const connections = useApi('me/connections', (signal) => client.GET('/api/v1/me/connections', { signal }), expired);
  const [notice, setNotice] = useState<string | null>(null);
  const outcome = consentOutcome(search);
  const reconnect = search.get('reconnect');
  const changed = (text: string) => {
    setNotice(text);
    connections.reload();
  };
  return (
    <>
      {outcome && (
        <Notice tone={outcome.tone}>
          {outcome.text}{' '}
          <button type="button" className="button button-small" onClick={() => navigate('/connections', { replace: true })}>
            Dismiss
          </button>
        </Notice>
      )}
      {reconnect && connections.data && <ReconnectPrompt id={reconnect} connections={connections.data.connections} />}
      <Card title="Connect with OAuth">
        <OAuthConnectForm />
      </Card>
      {notice && <Notice tone="success">{notice}</Notice>}
      <Card title="OAuth connections">
        {connections.loading && !connections.data && <Spinner label="Loading OAuth connections" />}
        <ErrorMessage error={connections.error} onRetry={connections.reload} />
        {connections.data && connections.data.connections.length === 0 && (
          <Empty title="No OAuth connections yet">APIs that take OAuth need one before your agents can call them.</Empty>
        )}
        {connections.data && connections.data.connections.length > 0 && (
          <ul className="key-list" aria-label="OAuth connections">
            {connections.data.connections.map((connection) => (
              <OAuthConnectionItem key={connection.id} connection={connection} onChanged={changed} />
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}

function ConnectForm({ onConnected }: { onConnected: (apiId: string) => void }) {
  // A link from a connection request in the inbox names the API: /connections?api=<id>
  const { search } = useLocation();
  const [apiId, setApiId] = useState(search.get('api') ?? '');
  const [apiKey, setApiKey] = useState('');
  // The example is a real directory id: an API that waits for a key of the person's own.
  const needsKey = useApi('apis/popular', (signal) => client.GET('/api/v1/apis', { params: { query: { sort: 'popular', limit: 100 } }, signal }));
  const keyApis = (needsKey.data?.apis ?? []).filter((api) => api.callability.state === 'needs_key');
  const example = keyApis[0]?.id;
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    await run(async () => {
      await call(client.POST('/api/v1/connect/{apiId}', { params: { path: { apiId: apiId.trim() } }, body: { apiKey } }));
      // The key leaves the browser's memory as soon as the server has it.
      setApiKey('');
      onConnected(apiId.trim());
      setApiId('');
    });
  };
  return (
    <>
      <form className="form-grid" onSubmit={submit}>
        <div className="field">
          <label className="field-label" htmlFor="connect-api-id">
            API id
          </label>
          <input
            id="connect-api-id"
            value={apiId}
            onChange={(e) => setApiId(e.target.value)}
            required
            placeholder={example ? `e.g. ${example}` : 'an API id from the directory'}
            autoComplete="off"
            list="connect-api-ids"
            aria-describedby="connect-api-id-help"
          />
          <datalist id="connect-api-ids">
            {keyApis.map((api) => (
              <option key={api.id} value={api.id}>
                {api.name}
              </option>
            ))}
          </datalist>
          <span className="field-help" id="connect-api-id-help">
            Find ids in the <Link href="/directory">directory</Link>.
          </span>
        </div>
        <div className="field">
          <label className="field-label" htmlFor="connect-api-key">
            Your key for that API
          </label>
          <input
            id="connect-api-key"
            type="password"
            value={apiKey}
            onChange={(e) => setApiKey(e.target.value)}
            required
            autoComplete="off"
            aria-describedby="connect-api-key-help"
          />
          <span className="field-help" id="connect-api-key-help">
            Stored encrypted; only its last characters are ever shown again.
          </span>
        </div>
        <div className="form-actions">
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Connecting…' : 'Connect'}
          </button>
        </div>
      </form>
      <ErrorMessage error={error} />
    </>
  );
}

export function ConnectionsPage() {
  const { expired } = useSession();
  const connections = useApi('me/apis', (signal) => client.GET('/api/v1/me/apis', { signal }), expired);
  const [notice, setNotice] = useState<string | null>(null);
  const { error, run } = useAction();

  return (
    <>
      <PageHeader
        title="Connections"
        description="Connect your accounts at OAuth providers, or bring your own key for an API: proxied calls then use them, at the API's bring-your-own-key price."
      />
      <OAuthConnections />
      <Card title="Bring your own key">
        <ConnectForm
          onConnected={(apiId) => {
            setNotice(`Connected ${apiId}.`);
            connections.reload();
          }}
        />
      </Card>
      {notice && <Notice tone="success">{notice}</Notice>}
      <ErrorMessage error={error} />
      <Card title="Your keys">
        {connections.loading && !connections.data && <Spinner label="Loading connections" />}
        <ErrorMessage error={connections.error} onRetry={connections.reload} />
        {connections.data && connections.data.connections.length === 0 && (
          <Empty title="No connections yet">
            Until you connect a key, you can call the APIs that need no key and the few the operator holds a platform key for; the others need your
            own key or an OAuth connection (the directory's "Callable now" filter shows which).
          </Empty>
        )}
        {connections.data && connections.data.connections.length > 0 && (
          <ul className="key-list" aria-label="Connected APIs">
            {connections.data.connections.map((connection) => (
              <li key={connection.apiId} className="key-item">
                <div className="key-main">
                  <p className="key-name">
                    <Link href={`/directory/${encodeURIComponent(connection.apiId)}`}>{connection.apiId}</Link>
                  </p>
                  <p className="key-meta">
                    Key ending <code>{connection.keyHint}</code> · connected {formatDateTime(connection.createdAt)}
                  </p>
                </div>
                <div className="key-actions">
                  <ConfirmButton
                    label="Disconnect"
                    confirmLabel="Yes, disconnect"
                    question={`Disconnect ${connection.apiId}? Your stored key is deleted.`}
                    onConfirm={() =>
                      run(async () => {
                        await call(client.DELETE('/api/v1/connect/{apiId}', { params: { path: { apiId: connection.apiId } } }));
                        setNotice(`Disconnected ${connection.apiId}.`);
                        connections.reload();
                      })
                    }
                  />
                </div>
              </li>
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}
