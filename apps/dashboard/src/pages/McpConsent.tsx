import { useEffect, useState, type FormEvent } from 'react';
import { call, client } from '../api';
import { formatDateTime } from '../format';
import { useLocation } from '../router';
import { useSession } from '../session';
import { Badge, Card, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/**
 * The consent page of the platform's authorization server (`/oauth/consent?interaction=…`): an MCP
 * client sent the person here to ask for access to the MCP endpoint. The page says which client asks
 * (its self-given name, unverified, and where the browser goes back to), lets the person set the
 * limits an agent key carries (spend limit, API allow-list, expiry) and approve or deny. Either
 * answer sends the browser back through the authorization server to the client.
 */
export function McpConsentPage() {
  const { account, expired } = useSession();
  const { search } = useLocation();
  const uid = search.get('interaction') ?? '';
  const pending = useApi(
    uid ? `consent:${uid}` : null,
    (signal) => client.GET('/api/v1/oauth2/interactions/{uid}', { params: { path: { uid } }, signal }),
    expired,
  );
  const [spendLimit, setSpendLimit] = useState('5');
  const [allowedApis, setAllowedApis] = useState('');
  const [expiresAt, setExpiresAt] = useState('');
  const [leaving, setLeaving] = useState(false);
  const { busy, error, run } = useAction();

  useEffect(() => {
    document.title = 'Allow an MCP client · Service dashboard';
  }, []);

  const leave = (to: string) => {
    setLeaving(true);
    window.location.assign(to);
  };

  const approve = async (event: FormEvent) => {
    event.preventDefault();
    const apis = allowedApis
      .split(/[\s,]+/)
      .map((id) => id.trim())
      .filter(Boolean);
    await run(async () => {
      const answer = await call(
        client.POST('/api/v1/oauth2/interactions/{uid}/approve', {
          params: { path: { uid } },
          body: {
            ...(spendLimit.trim() ? { spendLimit: spendLimit.trim() } : {}),
            ...(apis.length ? { allowedApis: apis } : {}),
            ...(expiresAt ? { expiresAt: new Date(expiresAt).toISOString() } : {}),
          },
        }),
      );
      leave(answer.redirectTo);
    });
  };

  const deny = () =>
    run(async () => {
      const answer = await call(client.POST('/api/v1/oauth2/interactions/{uid}/deny', { params: { path: { uid } } }));
      leave(answer.redirectTo);
    });

  if (!uid) {
    return (
      <>
        <PageHeader title="Allow an MCP client" />
        <Notice tone="warning">
          <p>This page is opened by an MCP client asking for access. Start from the client (for example its “Connect” or “Sign in” button).</p>
        </Notice>
      </>
    );
  }

  const request = pending.data?.request;
  return (
    <>
      <PageHeader title="Allow an MCP client" description="An application asks to use this account through the MCP endpoint." />
      {pending.loading && !pending.data && <Spinner label="Loading the request" />}
      <ErrorMessage error={pending.error} />
      {request && (
        <Card title={request.client.name ?? 'An unnamed client'}>
          <dl className="facts" aria-label="Who is asking">
            <dt>Client</dt>
            <dd data-testid="consent-client-name">
              {request.client.name ?? <em>no name given</em>}{' '}
              <Badge tone="grey">{request.client.registration === 'metadata_document' ? 'metadata document' : 'registered itself'}</Badge>
            </dd>
            <dt>Returns to</dt>
            <dd data-testid="consent-redirect-host">
              <code>{request.client.redirectHost}</code>
            </dd>
            <dt>Account</dt>
            <dd data-testid="consent-account">{account.email}: the access is this account’s, paid from its balance</dd>
            <dt>Access to</dt>
            <dd>
              <code>{request.resource}</code>: every MCP tool, within the limits below
            </dd>
            <dt>Answer before</dt>
            <dd>{formatDateTime(request.expiresAt)}</dd>
          </dl>
          <p className="muted">
            The name is the client’s own and is not verified; approve only if you started this from a client you trust and it returns to the host you
            expect. The access is listed among your agent keys, where you can revoke it at any time.
          </p>
          <form className="form-grid" onSubmit={approve} aria-label="Limits of this access">
            <label className="field">
              <span className="field-label">Spending limit in dollars (empty for none)</span>
              <input inputMode="decimal" value={spendLimit} onChange={(e) => setSpendLimit(e.target.value)} pattern="\d+(\.\d{1,6})?" />
            </label>
            <label className="field">
              <span className="field-label">Allowed API ids (optional, comma separated)</span>
              <input value={allowedApis} onChange={(e) => setAllowedApis(e.target.value)} placeholder="any API when empty" />
            </label>
            <label className="field">
              <span className="field-label">Access expires (optional)</span>
              <input type="datetime-local" value={expiresAt} onChange={(e) => setExpiresAt(e.target.value)} />
            </label>
            <div className="form-actions">
              <button type="submit" className="button button-primary" disabled={busy || leaving}>
                {busy || leaving ? 'Working…' : 'Approve'}
              </button>
              <button type="button" className="button" disabled={busy || leaving} onClick={() => void deny()}>
                Deny
              </button>
            </div>
          </form>
          <ErrorMessage error={error} />
        </Card>
      )}
    </>
  );
}
