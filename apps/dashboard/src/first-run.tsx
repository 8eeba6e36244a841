import { useCallback, useState } from 'react';
import { call, client, type Answer } from './api';
import { useInterval } from './live';
import { Link } from './router';
import type { SessionContextValue } from './session';
import { Card, CopyButton, ErrorMessage, useAction, useApi } from './ui';

type Checklist = Answer<'/api/v1/me/checklist'>;
type ItemId = Checklist['items'][number]['id'];

/**
 * The full key of the account's first key, or of a key made for the checklist, kept in this tab's
 * memory only (never in storage): the platform cannot show a key again, so after a reload the
 * checklist offers to make a new one.
 */
let freshKey: string | null = null;
export function rememberFreshKey(fullKey: string): void {
  freshKey = fullKey;
}

/** The API a person last opened in the directory, so the checklist's call uses what they chose. */
let lastViewedApi: { id: string; path: string } | null = null;
export function rememberViewedApi(id: string, endpoints: { method: string; path: string }[]): void {
  const get = endpoints.find((endpoint) => endpoint.method.toUpperCase() === 'GET' && !endpoint.path.includes('{'));
  lastViewedApi = { id, path: get?.path ?? '/' };
}

const KEY_PLACEHOLDER = 'YOUR_KEY';
const shellQuote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

export function curlCommand(origin: string, key: string, apiId: string, path: string): string {
  const clean = path.trim() === '' ? '/' : path.trim().startsWith('/') ? path.trim() : `/${path.trim()}`;
  return `curl -H ${shellQuote(`Authorization: Bearer ${key}`)} ${shellQuote(`${origin}/api/v1/proxy/${apiId}${clean}`)}`;
}

export function discoverCommand(origin: string, key: string): string {
  return `curl -H ${shellQuote(`Authorization: Bearer ${key}`)} ${shellQuote(`${origin}/api/v1/discover?q=weather+forecast`)}`;
}

export function mcpConfig(origin: string, key: string): string {
  return JSON.stringify(
    { mcpServers: { 'agent-api-platform': { type: 'http', url: `${origin}/mcp`, headers: { Authorization: `Bearer ${key}` } } } },
    null,
    2,
  );
}

const TITLES: Record<ItemId, string> = {
  copy_key: 'Copy your key',
  discover: 'Find an API',
  first_call: 'Make a first call',
  add_funds: 'Add funds',
};

function Step({ id, done, children }: { id: ItemId; done: boolean; children: React.ReactNode }) {
  return (
    <li className={`checklist-item ${done ? 'checklist-item-done' : ''}`} data-testid="checklist-item" data-item={id} data-done={done}>
      <p className="checklist-title">
        <span className="checklist-mark" aria-hidden="true">
          {done ? '✓' : ''}
        </span>
        {TITLES[id]} <span className="visually-hidden">{done ? '(done)' : '(to do)'}</span>
      </p>
      {!done && <div className="checklist-body">{children}</div>}
    </li>
  );
}

/**
 * The overview's first-run checklist: copy the key, find an API, make a first call, add funds. Each
 * item is ticked from the account's state (GET /me/checklist, re-read every few seconds while it
 * shows, so a call made from a terminal ticks it); it is gone once every item is done or the owner
 * closes it. The commands carry the person's own key while this tab knows it.
 */
export function FirstRunChecklist({ onUnauthenticated }: { onUnauthenticated: SessionContextValue['expired'] }) {
  const checklist = useApi('me/checklist', (signal) => client.GET('/api/v1/me/checklist', { signal }), onUnauthenticated);
  const [state, setState] = useState<Checklist | null>(null);
  const current = state ?? checklist.data;
  const open = current !== null && !current.done && !current.dismissed;
  const { reload } = checklist;
  const refresh = useCallback(() => {
    if (open) reload();
  }, [open, reload]);
  useInterval(refresh, 4000);
  const [key, setKey] = useState<string | null>(freshKey);
  const [apiId, setApiId] = useState(lastViewedApi?.id ?? '');
  const [path, setPath] = useState(lastViewedApi?.path ?? '/');
  const callable = useApi(open ? 'apis/callable' : null, (signal) =>
    client.GET('/api/v1/apis', { params: { query: { callable: 'true', sort: 'popular', limit: 20 } }, signal }),
  );
  const mark = useAction();
  const create = useAction();

  if (!current || !open) return <ErrorMessage error={checklist.error} onRetry={checklist.reload} />;
  const done = Object.fromEntries(current.items.map((item) => [item.id, item.done])) as Record<ItemId, boolean>;
  const remaining = current.items.filter((item) => !item.done).length;
  const origin = window.location.origin;
  const shownKey = key ?? KEY_PLACEHOLDER;
  const chosenApi = apiId.trim() || callable.data?.apis[0]?.id || 'API_ID';
  const send = (value: 'key_copied' | 'dismissed') =>
    mark.run(async () => {
      setState(await call(client.POST('/api/v1/me/checklist', { body: { mark: value } })));
    });
  const copied = () => void send('key_copied');
  const makeKey = () =>
    create.run(async () => {
      const created = await call(client.POST('/api/v1/keys', { body: { name: 'Getting started' } }));
      rememberFreshKey(created.fullKey);
      setKey(created.fullKey);
    });

  return (
    <Card
      title="Get started"
      className="checklist-card"
      actions={
        <button type="button" className="button button-small" onClick={() => void send('dismissed')} disabled={mark.busy}>
          Hide this checklist
        </button>
      }
    >
      <p className="muted" data-testid="checklist-remaining">
        {remaining} of {current.items.length} steps left. Each ticks itself as you go.
      </p>
      <ol className="checklist" aria-label="Getting started">
        <Step id="copy_key" done={done.copy_key}>
          {key ? (
            <>
              <p>Programs and agents send this key with every request. Keep it secret, like a password.</p>
              <div className="key-reveal-row">
                <code className="key-full" data-testid="checklist-key">
                  {key}
                </code>
                <CopyButton text={key} label="Copy key" onCopied={copied} />
              </div>
            </>
          ) : (
            <>
              <p>
                Your first key was shown once, when you created your account. If you did not keep it, make a new key here: the commands below then
                carry it.
              </p>
              <button type="button" className="button button-small" onClick={makeKey} disabled={create.busy}>
                Make a key for these steps
              </button>
              <ErrorMessage error={create.error} />
            </>
          )}
        </Step>
        <Step id="discover" done={done.discover}>
          <p>
            Describe a task in the <Link href="/directory">directory</Link>'s search (for example “weather forecast”) and open an API that fits. Or
            ask from a terminal:
          </p>
          <pre className="code-block" data-testid="discover-command">
            {discoverCommand(origin, shownKey)}
          </pre>
          <CopyButton text={discoverCommand(origin, shownKey)} label="Copy command" onCopied={key ? copied : undefined} />
        </Step>
        <Step id="first_call" done={done.first_call}>
          <p>Call an API through the platform with your key. The call's price comes off your balance; a call that fails upstream is refunded.</p>
          <div className="grid grid-2 checklist-fields">
            <label className="field">
              <span className="field-label">API</span>
              <input list="checklist-apis" value={apiId} placeholder={chosenApi} onChange={(event) => setApiId(event.target.value)} />
              <datalist id="checklist-apis">
                {(callable.data?.apis ?? []).map((api) => (
                  <option key={api.id} value={api.id}>
                    {api.name}
                  </option>
                ))}
              </datalist>
              <span className="field-help">An API you can call now; the one you last opened in the directory is filled in.</span>
            </label>
            <label className="field">
              <span className="field-label">Path</span>
              <input value={path} onChange={(event) => setPath(event.target.value)} />
              <span className="field-help">One of the API's endpoints, as its page in the directory lists them.</span>
            </label>
          </div>
          <pre className="code-block" data-testid="call-command">
            {curlCommand(origin, shownKey, chosenApi, path)}
          </pre>
          <CopyButton text={curlCommand(origin, shownKey, chosenApi, path)} label="Copy command" onCopied={key ? copied : undefined} />
          <p>Or let an AI agent call for you: add this to your MCP client's configuration (Claude Desktop, Cursor, VS Code and others read it).</p>
          <pre className="code-block" data-testid="mcp-config">
            {mcpConfig(origin, shownKey)}
          </pre>
          <CopyButton text={mcpConfig(origin, shownKey)} label="Copy configuration" onCopied={key ? copied : undefined} />
          {!key && <p className="small muted">Replace {KEY_PLACEHOLDER} with your key, or make a new key in the first step to have it filled in.</p>}
        </Step>
        <Step id="add_funds" done={done.add_funds}>
          <p>
            Your account starts with a small credit. Add funds with the form in the Balance card above when you need more (first verify your e-mail
            address if a notice above asks you to: funds are added only to verified accounts).
          </p>
        </Step>
      </ol>
      <ErrorMessage error={mark.error} />
    </Card>
  );
}
