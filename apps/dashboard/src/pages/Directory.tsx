import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDollars, formatNumber } from '../format';
import { Markdown } from '../markdown';
import { Link, navigate, useLocation } from '../router';
import { useSession } from '../session';
import { Badge, Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/** The price of GET /apis/{id}/instructions (10,000 micro-dollars), shown before the button is pressed. */
export const INSTRUCTIONS_PRICE = 0.01;

type ApiSummary = Answer<'/api/v1/apis'>['apis'][number];

function ApiList({ apis }: { apis: ApiSummary[] }) {
  return (
    <ul className="api-list">
      {apis.map((item) => (
        <li key={item.id} className="api-item" data-testid="api-item">
          <div>
            <Link href={`/directory/${encodeURIComponent(item.id)}`} className="api-name">
              {item.name}
            </Link>
            <span className="small muted"> · {item.provider}</span>
            <p className="api-description">{item.description || 'No description.'}</p>
          </div>
          <div className="api-facts small">
            <Badge tone="grey">{item.category}</Badge>
            <span>{formatDollars(item.pricePerCall)} per call</span>
            <span>{formatNumber(item.votes)} votes</span>
          </div>
        </li>
      ))}
    </ul>
  );
}

export function DirectoryPage() {
  const { search } = useLocation();
  const q = search.get('q') ?? '';
  const mode = search.get('mode') === 'discover' ? 'discover' : 'search';
  const category = search.get('category') ?? '';
  const [text, setText] = useState(q);
  const [textMode, setTextMode] = useState<'search' | 'discover'>(mode);
  useEffect(() => setText(q), [q]);

  const categories = useApi('categories', (signal) => client.GET('/api/v1/categories', { signal }));
  const list = useApi(mode === 'discover' && q ? null : JSON.stringify(['apis', category, q]), (signal) =>
    category
      ? client.GET('/api/v1/apis/category/{category}', { params: { path: { category }, query: { limit: 50 } }, signal })
      : client.GET('/api/v1/apis', { params: { query: { limit: 50, ...(q ? { q } : {}) } }, signal }),
  );
  const discovery = useApi(mode === 'discover' && q ? JSON.stringify(['discover', q]) : null, (signal) =>
    client.GET('/api/v1/discover', { params: { query: { q } }, signal }),
  );

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const params = new URLSearchParams();
    if (text.trim()) params.set('q', text.trim());
    if (textMode === 'discover') params.set('mode', 'discover');
    navigate(`/directory${params.size ? `?${params}` : ''}`);
  };

  return (
    <>
      <PageHeader title="Directory" description="Every API agents can call through the platform, with prices per call." />
      <Card>
        <form className="search-form" onSubmit={submit} role="search">
          <label className="field field-grow">
            <span className="field-label">{textMode === 'discover' ? 'Describe what you need' : 'Search APIs'}</span>
            <input
              type="search"
              value={text}
              onChange={(e) => setText(e.target.value)}
              placeholder={textMode === 'discover' ? 'e.g. send a text message when it will rain' : 'e.g. weather'}
            />
          </label>
          <fieldset className="segmented">
            <legend className="visually-hidden">Kind of search</legend>
            <label className={textMode === 'search' ? 'segmented-on' : ''}>
              <input type="radio" name="mode" value="search" checked={textMode === 'search'} onChange={() => setTextMode('search')} /> Keywords
            </label>
            <label className={textMode === 'discover' ? 'segmented-on' : ''}>
              <input type="radio" name="mode" value="discover" checked={textMode === 'discover'} onChange={() => setTextMode('discover')} /> Natural
              language
            </label>
          </fieldset>
          <button type="submit" className="button button-primary">
            Search
          </button>
        </form>
        {categories.data && categories.data.categories.length > 0 && (
          <nav className="chips" aria-label="Categories">
            <Link href="/directory" className="chip" aria-current={!category && !q ? 'page' : undefined}>
              All
            </Link>
            {categories.data.categories.map((c) => (
              <Link
                key={c.id}
                href={`/directory?category=${encodeURIComponent(c.id)}`}
                className="chip"
                aria-current={category === c.id ? 'page' : undefined}
              >
                {c.name} <span className="muted">{c.apiCount}</span>
              </Link>
            ))}
          </nav>
        )}
        <ErrorMessage error={categories.error} onRetry={categories.reload} />
      </Card>
      <Card title={mode === 'discover' && q ? `APIs for “${q}”` : category ? `Category: ${category}` : q ? `Results for “${q}”` : 'All APIs'}>
        {(list.loading || discovery.loading) && <Spinner label="Searching" />}
        <ErrorMessage error={list.error ?? discovery.error} />
        {discovery.data &&
          (discovery.data.results.length === 0 ? (
            <Empty title="Nothing matched that description">Try other words, or search by keyword.</Empty>
          ) : (
            <ul className="api-list">
              {discovery.data.results.map((result) => (
                <li key={result.api.id} className="api-item" data-testid="api-item">
                  <div>
                    <Link href={`/directory/${encodeURIComponent(result.api.id)}`} className="api-name">
                      {result.api.name}
                    </Link>
                    <span className="small muted"> · {result.api.provider}</span>
                    <p className="api-description">{result.reason}</p>
                  </div>
                  <div className="api-facts small">
                    <Badge tone="grey">{result.api.category}</Badge>
                    <span>{formatDollars(result.api.pricePerCall)} per call</span>
                  </div>
                </li>
              ))}
            </ul>
          ))}
        {list.data && list.data.apis.length === 0 && <Empty title="No APIs found">{list.data.hint ?? 'Try fewer or different words.'}</Empty>}
        {list.data && list.data.apis.length > 0 && <ApiList apis={list.data.apis} />}
      </Card>
    </>
  );
}

function Votes({ apiId }: { apiId: string }) {
  const { expired } = useSession();
  const tally = useApi(
    JSON.stringify(['votes', apiId]),
    (signal) => client.GET('/api/v1/votes', { params: { query: { targetType: 'api', targetId: apiId } }, signal }),
    expired,
  );
  const { busy, error, run } = useAction();
  const vote = async (value: 1 | -1) => {
    await run(async () => {
      if (tally.data?.myVote === value) {
        await call(client.DELETE('/api/v1/vote', { body: { targetType: 'api', targetId: apiId } }));
      } else {
        await call(client.POST('/api/v1/vote', { body: { targetType: 'api', targetId: apiId, value } }));
      }
      tally.reload();
    });
  };
  return (
    <div className="votes">
      <button type="button" className="button button-small" aria-pressed={tally.data?.myVote === 1} onClick={() => void vote(1)} disabled={busy}>
        ▲ Useful {tally.data ? `(${tally.data.up})` : ''}
      </button>
      <button type="button" className="button button-small" aria-pressed={tally.data?.myVote === -1} onClick={() => void vote(-1)} disabled={busy}>
        ▼ Not useful {tally.data ? `(${tally.data.down})` : ''}
      </button>
      {tally.data && <span className="small muted">Score {tally.data.score}</span>}
      <ErrorMessage error={error ?? tally.error} />
    </div>
  );
}

export function ApiDetailPage({ apiId }: { apiId: string }) {
  const detail = useApi(JSON.stringify(['api', apiId]), (signal) => client.GET('/api/v1/apis/{id}', { params: { path: { id: apiId } }, signal }));
  const [instructions, setInstructions] = useState<string | null>(null);
  const [charged, setCharged] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const item = detail.data?.api;

  const loadInstructions = async () => {
    await run(async () => {
      const body = await call(client.GET('/api/v1/apis/{id}/instructions', { params: { path: { id: apiId } } }));
      setInstructions(body.instructions);
      setCharged(`${formatDollars(INSTRUCTIONS_PRICE)} was charged to your balance.`);
    });
  };

  return (
    <>
      <PageHeader
        title={item?.name ?? 'API'}
        description={item ? `${item.provider}${item.version ? ` · version ${item.version}` : ''}` : undefined}
      />
      <p>
        <Link href="/directory">← Directory</Link>
      </p>
      {detail.loading && !detail.data && <Spinner label="Loading the API" />}
      <ErrorMessage error={detail.error} onRetry={detail.reload} />
      {item && (
        <>
          <Card title="About">
            <p>{item.description || 'No description.'}</p>
            <dl className="facts">
              <div>
                <dt>API id</dt>
                <dd className="mono">{item.id}</dd>
              </div>
              <div>
                <dt>Category</dt>
                <dd>{item.category}</dd>
              </div>
              <div>
                <dt>Price per call</dt>
                <dd>
                  {formatDollars(item.pricePerCall)}
                  {item.byokPricePerCall !== null ? ` (${formatDollars(item.byokPricePerCall)} with your own key)` : ''}
                </dd>
              </div>
              <div>
                <dt>Call it through</dt>
                <dd className="mono">{item.proxyPath}</dd>
              </div>
              <div>
                <dt>Upstream</dt>
                <dd className="mono">{item.baseUrl ?? 'registered by the operator (not published)'}</dd>
              </div>
            </dl>
            <Votes apiId={item.id} />
          </Card>
          <Card title="Agent instructions">
            {instructions === null ? (
              <>
                <p>
                  Instructions written for agents: how to authenticate, call the main endpoints through the proxy, and handle errors. Reading them
                  costs <strong>{formatDollars(INSTRUCTIONS_PRICE)}</strong>, charged to your balance.
                </p>
                <button type="button" className="button button-primary" onClick={() => void loadInstructions()} disabled={busy}>
                  {busy ? 'Loading…' : `Show instructions for ${formatDollars(INSTRUCTIONS_PRICE)}`}
                </button>
                <ErrorMessage error={error} />
              </>
            ) : (
              <>
                {charged && <Notice tone="info">{charged}</Notice>}
                <Markdown source={instructions} />
              </>
            )}
          </Card>
          <Card title={`Endpoints (${formatNumber(item.endpointCount)})`}>
            {item.endpoints.length === 0 ? (
              <Empty title="No endpoints listed" />
            ) : (
              <div className="table-scroll">
                <table className="table">
                  <thead>
                    <tr>
                      <th scope="col">Method</th>
                      <th scope="col">Path</th>
                      <th scope="col">What it does</th>
                    </tr>
                  </thead>
                  <tbody>
                    {item.endpoints.map((endpoint) => (
                      <tr key={`${endpoint.method} ${endpoint.path}`}>
                        <td>
                          <Badge tone="blue">{endpoint.method.toUpperCase()}</Badge>
                        </td>
                        <td className="mono">{endpoint.path}</td>
                        <td>{endpoint.summary}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </Card>
        </>
      )}
    </>
  );
}
