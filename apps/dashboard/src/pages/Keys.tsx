import { useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime, formatDollars, statusLabel } from '../format';
import { useSession } from '../session';
import { Badge, Card, ConfirmButton, CopyButton, Empty, ErrorMessage, PageHeader, Spinner, useAction, useApi } from '../ui';

type KeyMeta = Answer<'/api/v1/keys'>['keys'][number];
type AgentKey = Answer<'/api/v1/agent-keys'>['agentKeys'][number];

const STATUS_TONE = { enabled: 'green', disabled: 'amber', revoked: 'grey' } as const;

/** A freshly created key: shown in full this one time, with a copy button and a clear warning. */
export function KeyReveal({ fullKey, onDone }: { fullKey: string; onDone?: () => void }) {
  return (
    <div className="key-reveal" role="region" aria-label="New key">
      <p className="key-reveal-warning">
        <strong>Copy this key now.</strong> It is shown only once: the platform keeps only a fingerprint of it and cannot show it again.
      </p>
      <div className="key-reveal-row">
        <code className="key-full" data-testid="full-key">
          {fullKey}
        </code>
        <CopyButton text={fullKey} label="Copy key" />
      </div>
      {onDone && (
        <button type="button" className="button button-small" onClick={onDone}>
          I have stored it — hide the key
        </button>
      )}
    </div>
  );
}

function KeyRow({ apiKey, onChanged }: { apiKey: KeyMeta; onChanged: () => void }) {
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(apiKey.name);
  const { busy, error, run } = useAction();
  const revoked = apiKey.status === 'revoked';

  const change = async (body: { name?: string; status?: 'enabled' | 'disabled' }) => {
    await run(async () => {
      await call(client.PATCH('/api/v1/keys/{id}', { params: { path: { id: apiKey.id } }, body }));
      setRenaming(false);
      onChanged();
    });
  };
  const rename = (event: FormEvent) => {
    event.preventDefault();
    void change({ name });
  };

  return (
    <li className={`key-item ${revoked ? 'key-item-revoked' : ''}`} data-testid="key-row">
      <div className="key-main">
        {renaming ? (
          <form className="inline-form" onSubmit={rename}>
            <label className="visually-hidden" htmlFor={`rename-${apiKey.id}`}>
              New name for {apiKey.name}
            </label>
            <input id={`rename-${apiKey.id}`} value={name} onChange={(e) => setName(e.target.value)} maxLength={100} required autoFocus />
            <button type="submit" className="button button-small button-primary" disabled={busy}>
              Save
            </button>
            <button type="button" className="button button-small" onClick={() => setRenaming(false)}>
              Cancel
            </button>
          </form>
        ) : (
          <p className="key-name">
            {apiKey.name} <Badge tone={STATUS_TONE[apiKey.status]}>{statusLabel(apiKey.status)}</Badge>
          </p>
        )}
        <p className="key-meta">
          <code>{apiKey.prefix}…</code> · created {formatDateTime(apiKey.createdAt)} ·{' '}
          {apiKey.lastUsedAt ? `last used ${formatDateTime(apiKey.lastUsedAt)}` : 'never used'}
        </p>
        <ErrorMessage error={error} />
      </div>
      {!revoked && (
        <div className="key-actions">
          {!renaming && (
            <button type="button" className="button button-small" onClick={() => setRenaming(true)} aria-label={`Rename ${apiKey.name}`}>
              Rename
            </button>
          )}
          <button
            type="button"
            className="button button-small"
            disabled={busy}
            onClick={() => void change({ status: apiKey.status === 'enabled' ? 'disabled' : 'enabled' })}
            aria-label={`${apiKey.status === 'enabled' ? 'Disable' : 'Enable'} ${apiKey.name}`}
          >
            {apiKey.status === 'enabled' ? 'Disable' : 'Enable'}
          </button>
          <ConfirmButton
            label="Revoke"
            confirmLabel="Revoke for good"
            question={`Revoke “${apiKey.name}”? Programs using it stop working at once; this cannot be undone.`}
            onConfirm={() =>
              run(async () => {
                await call(client.DELETE('/api/v1/keys/{id}', { params: { path: { id: apiKey.id } } }));
                onChanged();
              })
            }
          />
        </div>
      )}
    </li>
  );
}

function CreateKey({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const { busy, error, run } = useAction();
  const [fullKey, setFullKey] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    await run(async () => {
      const created = await call(client.POST('/api/v1/keys', { body: { name } }));
      setFullKey(created.fullKey);
      setName('');
      onCreated();
    });
  };
  return (
    <>
      <form className="inline-form" onSubmit={submit}>
        <label className="field field-inline">
          <span className="field-label">Key name</span>
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} placeholder="e.g. production server" />
        </label>
        <button type="submit" className="button button-primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create key'}
        </button>
      </form>
      <ErrorMessage error={error} />
      {fullKey && <KeyReveal fullKey={fullKey} onDone={() => setFullKey(null)} />}
    </>
  );
}

function CreateAgentKey({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [spendLimit, setSpendLimit] = useState('');
  const [allowedApis, setAllowedApis] = useState('');
  const [expiresAt, setExpiresAt] = useState('');
  const { busy, error, run } = useAction();
  const [fullKey, setFullKey] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const apis = allowedApis
      .split(/[\s,]+/)
      .map((id) => id.trim())
      .filter(Boolean);
    await run(async () => {
      const created = await call(
        client.POST('/api/v1/agent-keys', {
          body: {
            name,
            ...(spendLimit ? { spendLimit } : {}),
            ...(apis.length ? { allowedApis: apis } : {}),
            ...(expiresAt ? { expiresAt: new Date(expiresAt).toISOString() } : {}),
          },
        }),
      );
      setFullKey(created.fullKey);
      setName('');
      setSpendLimit('');
      setAllowedApis('');
      setExpiresAt('');
      onCreated();
    });
  };
  return (
    <>
      <form className="form-grid" onSubmit={submit}>
        <label className="field">
          <span className="field-label">Name</span>
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} placeholder="e.g. research agent" />
        </label>
        <label className="field">
          <span className="field-label">Spending limit in dollars (optional)</span>
          <input
            inputMode="decimal"
            value={spendLimit}
            onChange={(e) => setSpendLimit(e.target.value)}
            placeholder="e.g. 5.00"
            pattern="\d+(\.\d{1,6})?"
          />
        </label>
        <label className="field">
          <span className="field-label">Allowed API ids (optional, comma separated)</span>
          <input value={allowedApis} onChange={(e) => setAllowedApis(e.target.value)} placeholder="any API when empty" />
        </label>
        <label className="field">
          <span className="field-label">Expires (optional)</span>
          <input type="datetime-local" value={expiresAt} onChange={(e) => setExpiresAt(e.target.value)} />
        </label>
        <div className="form-actions">
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Creating…' : 'Create agent key'}
          </button>
        </div>
      </form>
      <ErrorMessage error={error} />
      {fullKey && <KeyReveal fullKey={fullKey} onDone={() => setFullKey(null)} />}
    </>
  );
}

function AgentKeyRow({ agentKey, onChanged }: { agentKey: AgentKey; onChanged: () => void }) {
  const { error, run } = useAction();
  const expired = agentKey.expiresAt !== null && new Date(agentKey.expiresAt).getTime() <= Date.now();
  return (
    <li className={`key-item ${agentKey.status === 'revoked' ? 'key-item-revoked' : ''}`} data-testid="agent-key-row">
      <div className="key-main">
        <p className="key-name">
          {agentKey.name} <Badge tone={expired ? 'red' : STATUS_TONE[agentKey.status]}>{expired ? 'Expired' : statusLabel(agentKey.status)}</Badge>
          {agentKey.mcpClient && <Badge tone="blue">MCP client (OAuth)</Badge>}
        </p>
        {agentKey.mcpClient && (
          <p className="key-meta">
            Access you approved for <strong>{agentKey.mcpClient.name}</strong>; it signs in with OAuth, so this key's secret is never shown.
          </p>
        )}
        <p className="key-meta">
          <code>{agentKey.prefix}…</code> · spent {formatDollars(agentKey.spent)}
          {agentKey.spendLimit === null ? ' · no spending limit' : ` of ${formatDollars(agentKey.spendLimit)}`} ·{' '}
          {agentKey.allowedApis === null ? 'any API' : `only ${agentKey.allowedApis.join(', ')}`} ·{' '}
          {agentKey.expiresAt ? `${expired ? 'expired' : 'expires'} ${formatDateTime(agentKey.expiresAt)}` : 'never expires'}
        </p>
        {agentKey.spendLimit !== null && agentKey.spendLimit > 0 && (
          <meter
            className="meter"
            min={0}
            max={agentKey.spendLimit}
            value={Math.min(agentKey.spent, agentKey.spendLimit)}
            aria-label={`Spent of limit for ${agentKey.name}`}
          />
        )}
        <ErrorMessage error={error} />
      </div>
      {agentKey.status !== 'revoked' && (
        <div className="key-actions">
          <ConfirmButton
            label="Delete"
            confirmLabel="Delete for good"
            question={
              agentKey.mcpClient
                ? `Revoke “${agentKey.name}”? ${agentKey.mcpClient.name} loses access at once, its tokens included.`
                : `Delete “${agentKey.name}”? The agent using it stops at once.`
            }
            onConfirm={() =>
              run(async () => {
                await call(client.DELETE('/api/v1/agent-keys/{id}', { params: { path: { id: agentKey.id } } }));
                onChanged();
              })
            }
          />
        </div>
      )}
    </li>
  );
}

export function KeysPage() {
  const { expired } = useSession();
  // The lists page at 50 by default; ask for the most a page holds (200) so older keys stay manageable.
  const keys = useApi('keys', (signal) => client.GET('/api/v1/keys', { params: { query: { limit: 200 } }, signal }), expired);
  const agentKeys = useApi('agent-keys', (signal) => client.GET('/api/v1/agent-keys', { params: { query: { limit: 200 } }, signal }), expired);

  return (
    <>
      <PageHeader
        title="Keys"
        description="API keys for your programs, and agent keys with their own limits. A full key is shown only when it is created."
      />
      <Card title="API keys">
        <CreateKey onCreated={keys.reload} />
        {keys.loading && !keys.data && <Spinner label="Loading keys" />}
        <ErrorMessage error={keys.error} onRetry={keys.reload} />
        {keys.data && keys.data.keys.length === 0 && <Empty title="No API keys yet">Create one above to call the API from your programs.</Empty>}
        {keys.data && keys.data.keys.length > 0 && (
          <ul className="key-list" aria-label="API keys">
            {keys.data.keys.map((key) => (
              <KeyRow key={key.id} apiKey={key} onChanged={keys.reload} />
            ))}
          </ul>
        )}
      </Card>
      <Card title="Agent keys">
        <p className="muted">
          Agent keys can use the directory, the proxy and cookbooks, but cannot manage keys, connections or funds. MCP clients you approve through
          OAuth are listed here too, with the limits you chose; deleting one revokes its access.
        </p>
        <CreateAgentKey onCreated={agentKeys.reload} />
        {agentKeys.loading && !agentKeys.data && <Spinner label="Loading agent keys" />}
        <ErrorMessage error={agentKeys.error} onRetry={agentKeys.reload} />
        {agentKeys.data && agentKeys.data.agentKeys.length === 0 && (
          <Empty title="No agent keys yet">Give each agent its own key with a spending limit.</Empty>
        )}
        {agentKeys.data && agentKeys.data.agentKeys.length > 0 && (
          <ul className="key-list" aria-label="Agent keys">
            {agentKeys.data.agentKeys.map((key) => (
              <AgentKeyRow key={key.id} agentKey={key} onChanged={agentKeys.reload} />
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}
