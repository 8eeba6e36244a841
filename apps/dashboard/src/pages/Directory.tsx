import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { rememberViewedApi } from '../first-run';
import { callabilityAdvice, peopleText } from '../wording';
import { formatDollars, formatNumber } from '../format';
import { Markdown } from '../markdown';
import { Link, navigate, useLocation } from '../router';
import { useSession } from '../session';
import { Badge, Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';

/** The price of GET /apis/{id}/instructions (10,000 micro-dollars), shown before the button is pressed. */
export const INSTRUCTIONS_PRICE = 0.01;

type ApiSummary = Answer<'/api/v1/apis'>['apis'][number];
type Callability = ApiSummary['callability'];

const STATE_BADGES: Record<Callability['state'], { label: string; tone: 'green' | 'amber' | 'blue' | 'grey' }> = {
  ready: { label: 'Ready', tone: 'green' },
  needs_key: { label: 'Needs your key', tone: 'amber' },
  needs_oauth: { label: 'Connect with OAuth', tone: 'blue' },
  unavailable: { label: 'Unavailable', tone: 'grey' },
};

/** Whether you can call the API now; what it takes (in a person's words) shows on hover and to screen readers. */
export function CallabilityBadge({ callability }: { callability: Callability }) {
  const badge = STATE_BADGES[callability.state];
  const advice = callabilityAdvice(callability);
  return (
    <span title={advice ?? undefined} data-testid="callability" data-state={callability.state}>
      <Badge tone={badge.tone}>{badge.label}</Badge>
      {advice && <span className="visually-hidden">: {advice}</span>}
    </span>
  );
}

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
            <CallabilityBadge callability={item.callability} />
            <Badge tone="grey">{item.category}</Badge>
            <span>{formatDollars(item.pricePerCall)} per call</span>
            <span>{formatNumber(item.votes)} votes</span>
          </div>
        </li>
      ))}
    </ul>
  );
}

/** The browse orders of GET /apis (sort=), as a person reads them; "" is the default order. */
const SORTS = [
  { value: '', label: 'Featured first' },
  { value: 'name', label: 'Name (A to Z)' },
  { value: 'price', label: 'Price (cheapest first)' },
  { value: 'votes', label: 'Votes (most useful first)' },
  { value: 'popular', label: 'Popular (most used, last 30 days)' },
] as const;
type Sort = Exclude<(typeof SORTS)[number]['value'], ''>;
const isSort = (value: string): value is Sort => SORTS.some((s) => s.value === value && value !== '');

type DiscoveryResult = Answer<'/api/v1/discover'>['results'][number];

/**
 * What an API found by discovery does for the task: the operations that do it with the price of a
 * call on each, else the sentence that matched, else its description.
 */
function DiscoveryMatch({ result }: { result: DiscoveryResult }) {
  const { operations } = result;
  const { sentence } = result.matched;
  if (operations.length > 0) {
    return (
      <ul className="api-matches" data-testid="discovery-match">
        {operations.map((o) => (
          <li key={`${o.method} ${o.path}`} data-testid="discovery-operation">
            {o.summary ? `${o.summary} ` : ''}
            <span className="mono small muted">
              {o.method.toUpperCase()} {o.path} · {formatDollars(o.price)} per call
            </span>
          </li>
        ))}
      </ul>
    );
  }
  return (
    <p className="api-description" data-testid="discovery-match">
      {sentence ?? (result.api.description || 'No description.')}
    </p>
  );
}

/** The directory's URL for these listing settings (empty ones left out). */
function directoryHref(settings: Record<string, string>) {
  const params = new URLSearchParams(Object.entries(settings).filter(([, value]) => value !== ''));
  return `/directory${params.size ? `?${params}` : ''}`;
}

export function DirectoryPage() {
  const { search } = useLocation();
  const q = search.get('q') ?? '';
  const mode = search.get('mode') === 'discover' ? 'discover' : 'search';
  const category = search.get('category') ?? '';
  const callableOnly = search.get('callable') === 'true';
  const sortParam = search.get('sort') ?? '';
  // Search is ordered by relevance: the order applies to browsing only.
  const sort = !q && isSort(sortParam) ? sortParam : undefined;
  const [text, setText] = useState(q);
  const [textMode, setTextMode] = useState<'search' | 'discover'>(mode);
  useEffect(() => setText(q), [q]);

  const categories = useApi('categories', (signal) => client.GET('/api/v1/categories', { signal }));
  const callable = callableOnly ? { callable: 'true' as const } : {};
  const listQuery = { limit: 50, ...(q ? { q } : {}), ...(category ? { category } : {}), ...(sort ? { sort } : {}), ...callable };
  const listKey = mode === 'discover' && q ? null : JSON.stringify(['apis', category, q, callableOnly, sort]);
  const listed = useApi(listKey, (signal) => client.GET('/api/v1/apis', { params: { query: listQuery }, signal }));
  // useApi keeps its last data when its key goes null: a discovery must not show the listing before it.
  const list = listKey === null ? { ...listed, data: null, error: null, loading: false } : listed;
  const discovery = useApi(mode === 'discover' && q ? JSON.stringify(['discover', q, callableOnly]) : null, (signal) =>
    client.GET('/api/v1/discover', { params: { query: { q, ...callable } }, signal }),
  );

  // The pages after the first, loaded by "Show more"; a new listing starts again from its first page.
  const [more, setMore] = useState<{ key: string | null; apis: ApiSummary[]; nextCursor: string | null }>({ key: null, apis: [], nextCursor: null });
  const loaded = more.key === listKey ? more : null;
  const nextCursor = loaded ? loaded.nextCursor : (list.data?.nextCursor ?? null);
  const loadMore = useAction();
  const showMore = async () => {
    if (!nextCursor) return;
    await loadMore.run(async () => {
      const page = await call(client.GET('/api/v1/apis', { params: { query: { ...listQuery, cursor: nextCursor } } }));
      setMore({ key: listKey, apis: [...(loaded?.apis ?? []), ...page.apis], nextCursor: page.nextCursor });
    });
  };
  const apis = list.data ? [...list.data.apis, ...(loaded?.apis ?? [])] : [];

  const submit = (event: FormEvent) => {
    event.preventDefault();
    navigate(
      directoryHref({
        q: text.trim(),
        mode: textMode === 'discover' ? 'discover' : '',
        callable: callableOnly ? 'true' : '',
        sort: text.trim() ? '' : (sort ?? ''),
      }),
    );
  };

  /** The same listing with one setting changed. */
  const withSetting = (name: string, value: string) => {
    const params = new URLSearchParams(search);
    if (value) params.set(name, value);
    else params.delete(name);
    return `/directory${params.size ? `?${params}` : ''}`;
  };

  return (
    <>
      <PageHeader
        title="Directory"
        description="The APIs of the directory with their price per call and whether you can call them now: some are ready, others need your own key or an OAuth connection first, and some cannot be called through the platform yet."
      />
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
          <label className="filter-toggle">
            <input
              type="checkbox"
              checked={callableOnly}
              onChange={() => navigate(withSetting('callable', callableOnly ? '' : 'true'))}
              data-testid="callable-filter"
            />{' '}
            Callable now
          </label>
        </form>
        {categories.data && categories.data.categories.length > 0 && (
          <>
            {/* On a phone the ~40 chips would push every result below the fold: a select stands in for them there. */}
            <label className="field category-select">
              <span className="field-label">Category</span>
              <select
                value={category}
                data-testid="category-select"
                onChange={(e) => navigate(directoryHref({ category: e.target.value, callable: callableOnly ? 'true' : '', sort: sort ?? '' }))}
              >
                <option value="">All categories</option>
                {categories.data.categories.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.name} ({c.apiCount})
                  </option>
                ))}
              </select>
            </label>
            <nav className="chips category-chips" aria-label="Categories">
              <Link href="/directory" className="chip" aria-current={!category && !q ? 'page' : undefined}>
                All
              </Link>
              {categories.data.categories.map((c) => (
                <Link
                  key={c.id}
                  href={directoryHref({ category: c.id, callable: callableOnly ? 'true' : '', sort: sort ?? '' })}
                  className="chip"
                  aria-current={category === c.id ? 'page' : undefined}
                >
                  {c.name} <span className="muted">{c.apiCount}</span>
                </Link>
              ))}
            </nav>
          </>
        )}
        <ErrorMessage error={categories.error} onRetry={categories.reload} />
      </Card>
      <Card title={mode === 'discover' && q ? `APIs for “${q}”` : category ? `Category: ${category}` : q ? `Results for “${q}”` : 'All APIs'}>
        {!q && (
          <label className="field sort-select">
            <span className="field-label">Sort by</span>
            <select value={sort ?? ''} data-testid="sort-select" onChange={(e) => navigate(withSetting('sort', e.target.value))}>
              {SORTS.map((s) => (
                <option key={s.value} value={s.value}>
                  {s.label}
                </option>
              ))}
            </select>
          </label>
        )}
        {(list.loading || discovery.loading) && <Spinner label="Searching" />}
        <ErrorMessage error={list.error ?? discovery.error} />
        {discovery.data &&
          (discovery.data.results.length === 0 ? (
            <Empty title="Nothing matched that description">
              {peopleText(discovery.data.hint ?? '', null) || 'Try other words, or search by keyword.'}
            </Empty>
          ) : (
            <ul className="api-list">
              {discovery.data.results.map((result) => (
                <li key={result.api.id} className="api-item" data-testid="api-item">
                  <div>
                    <Link href={`/directory/${encodeURIComponent(result.api.id)}`} className="api-name">
                      {result.api.name}
                    </Link>
                    <span className="small muted"> · {result.api.provider}</span>
                    <DiscoveryMatch result={result} />
                  </div>
                  <div className="api-facts small">
                    <CallabilityBadge callability={result.api.callability} />
                    <Badge tone="grey">{result.api.category}</Badge>
                    <span>{formatDollars(result.api.pricePerCall)} per call</span>
                  </div>
                </li>
              ))}
            </ul>
          ))}
        {list.data && apis.length === 0 && (
          <Empty title="No APIs found">{peopleText(list.data.hint ?? '', null) || 'Try fewer or different words.'}</Empty>
        )}
        {apis.length > 0 && (
          <>
            <ApiList apis={apis} />
            <p className="small muted" data-testid="shown-count">
              Showing {formatNumber(apis.length)} {apis.length === 1 ? 'API' : 'APIs'}
              {nextCursor ? '' : ' (all of them)'}
            </p>
            {nextCursor && (
              <button type="button" className="button" onClick={() => void showMore()} disabled={loadMore.busy} data-testid="show-more">
                {loadMore.busy ? 'Loading…' : 'Show more'}
              </button>
            )}
            <ErrorMessage error={loadMore.error} />
          </>
        )}
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
  useEffect(() => {
    if (item) rememberViewedApi(item.id, item.endpoints);
  }, [item]);

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
                <dt>Can you call it now?</dt>
                <dd>
                  <CallabilityBadge callability={item.callability} />
                  {callabilityAdvice(item.callability) && <p className="small">{callabilityAdvice(item.callability)}</p>}
                  {item.callability.keyDocsUrl && (
                    <p className="small">
                      Get a key:{' '}
                      <a href={item.callability.keyDocsUrl} target="_blank" rel="noreferrer noopener">
                        {item.callability.keyDocsUrl}
                      </a>
                    </p>
                  )}
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
