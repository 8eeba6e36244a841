import { useState, type FormEvent } from 'react';
import { call, client } from '../api';
import { formatDateTime } from '../format';
import { Link } from '../router';
import { useSession } from '../session';
import { Card, ConfirmButton, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

function ConnectForm({ onConnected }: { onConnected: (apiId: string) => void }) {
  const [apiId, setApiId] = useState('');
  const [apiKey, setApiKey] = useState('');
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
            placeholder="e.g. openweathermap.org"
            autoComplete="off"
            aria-describedby="connect-api-id-help"
          />
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
        description="Bring your own key for an API: proxied calls to it then use your key, at the API's bring-your-own-key price."
      />
      <Card title="Connect an API">
        <ConnectForm
          onConnected={(apiId) => {
            setNotice(`Connected ${apiId}.`);
            connections.reload();
          }}
        />
      </Card>
      {notice && <Notice tone="success">{notice}</Notice>}
      <ErrorMessage error={error} />
      <Card title="Connected APIs">
        {connections.loading && !connections.data && <Spinner label="Loading connections" />}
        <ErrorMessage error={connections.error} onRetry={connections.reload} />
        {connections.data && connections.data.connections.length === 0 && (
          <Empty title="No connections yet">Calls use the platform's own keys until you connect yours.</Empty>
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
