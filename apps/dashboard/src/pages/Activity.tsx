import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { peopleText } from '../wording';
import { formatDateTime, formatDollars, formatNumber } from '../format';
import { Link, useLocation } from '../router';
import { useSession } from '../session';
import { ApiLink, Badge, Card, Empty, ErrorMessage, PageHeader, Spinner, useApi } from '../ui';

type ActivityEntry = Answer<'/api/v1/activity'>['activity'][number];
type Outcome = ActivityEntry['outcome'];

const OUTCOME_TONE = { served: 'green', failed: 'amber', refunded: 'blue' } as const;
const OUTCOME_LABEL: Record<Outcome, string> = { served: 'Served', failed: 'Failed', refunded: 'Refunded' };

interface Filters {
  api: string;
  key: string;
  outcome: '' | Outcome;
  status: string;
  since: string;
  until: string;
  requestId: string;
}
const NO_FILTERS: Filters = { api: '', key: '', outcome: '', status: '', since: '', until: '', requestId: '' };

/** The filters as the route's query: empty fields left out; dates are whole UTC days (until: the day after the one chosen). */
function queryOf(filters: Filters) {
  const nextDay = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return {
    ...(filters.api ? { api: filters.api.trim() } : {}),
    ...(filters.key ? { key: filters.key } : {}),
    ...(filters.outcome ? { outcome: filters.outcome } : {}),
    ...(filters.status ? { status: filters.status.trim() } : {}),
    ...(filters.since ? { since: filters.since } : {}),
    ...(filters.until ? { until: nextDay(filters.until) } : {}),
    ...(filters.requestId.trim() ? { requestId: filters.requestId.trim() } : {}),
  };
}

function CallRow({ entry }: { entry: ActivityEntry }) {
  const [open, setOpen] = useState(false);
  const problem = entry.outcome !== 'served';
  return (
    <>
      <tr data-testid="activity-row" data-outcome={entry.outcome}>
        <td>{formatDateTime(entry.at)}</td>
        <td>
          <ApiLink apiId={entry.apiId} />
          <div className="muted small">
            {entry.method ? <code>{entry.method}</code> : entry.item} {entry.path ? <code>{entry.path}</code> : null}
          </div>
        </td>
        <td className="num">{entry.status}</td>
        <td>
          <Badge tone={OUTCOME_TONE[entry.outcome]}>{OUTCOME_LABEL[entry.outcome]}</Badge>
          {entry.errorCode ? (
            <div className="small">
              <code>{entry.errorCode}</code>
            </div>
          ) : null}
        </td>
        <td className="num">
          {formatDollars(entry.cost)}
          {entry.outcome === 'refunded' ? (
            <div className="muted small">
              {formatDollars(entry.charged)} refunded{entry.refundPending ? ' (pending)' : ''}
            </div>
          ) : null}
        </td>
        <td className="num">{formatNumber(entry.latencyMs)} ms</td>
        <td>{entry.key ? `${entry.key.name ?? entry.key.id}${entry.key.kind === 'agent' ? ' (agent)' : ''}` : 'Dashboard'}</td>
        <td>
          <button type="button" className="button button-small" aria-expanded={open} onClick={() => setOpen(!open)}>
            {open ? 'Less' : 'More'}
          </button>
        </td>
      </tr>
      {problem && entry.hint && peopleText(entry.hint, null) ? (
        <tr>
          <td colSpan={8} className="small" data-testid="activity-hint">
            {peopleText(entry.hint, null)}
          </td>
        </tr>
      ) : null}
      {open ? (
        <tr>
          <td colSpan={8} className="small">
            <dl className="facts">
              <div>
                <dt>Call</dt>
                <dd>
                  <code>{entry.id}</code>
                </dd>
              </div>
              {entry.requestId ? (
                <div>
                  <dt>Request id</dt>
                  <dd>
                    <code>{entry.requestId}</code>
                  </dd>
                </div>
              ) : null}
              <div>
                <dt>Charge</dt>
                <dd>{entry.chargeId ? <code>{entry.chargeId}</code> : 'none'}</dd>
              </div>
              {entry.refundId ? (
                <div>
                  <dt>Refund</dt>
                  <dd>
                    <code>{entry.refundId}</code>
                  </dd>
                </div>
              ) : null}
              <div>
                <dt>Paid with</dt>
                <dd>{entry.paidWith ?? 'nothing (free)'}</dd>
              </div>
              <div>
                <dt>Bytes</dt>
                <dd>
                  {formatNumber(entry.bytesIn)} sent, {formatNumber(entry.bytesOut)} received
                </dd>
              </div>
              {entry.key?.prefix ? (
                <div>
                  <dt>Key</dt>
                  <dd>
                    <code>{entry.key.prefix}…</code>
                  </dd>
                </div>
              ) : null}
            </dl>
          </td>
        </tr>
      ) : null}
    </>
  );
}

/** The two views of the account's money, one nav entry: calls (Activity) and ledger movements (Statement). */
export function MoneyTabs({ current }: { current: 'activity' | 'statement' }) {
  return (
    <nav className="segmented" aria-label="Activity and statement">
      <Link href="/activity" className="button button-small" aria-current={current === 'activity' ? 'page' : undefined}>
        Calls
      </Link>
      <Link href="/statement" className="button button-small" aria-current={current === 'statement' ? 'page' : undefined}>
        Statement
      </Link>
    </nav>
  );
}

/** Every metered call of the account, newest first, with filters and more pages on demand. */
export function ActivityPage() {
  const { expired } = useSession();
  // A link may name the API to show (Top APIs' platform rows: /activity?api=platform.docs), also from this page.
  const apiParam = useLocation().search.get('api') ?? '';
  const [draft, setDraft] = useState<Filters>(() => ({ ...NO_FILTERS, api: apiParam }));
  const [filters, setFilters] = useState<Filters>(draft);
  useEffect(() => {
    setDraft((previous) => (previous.api === apiParam ? previous : { ...previous, api: apiParam }));
    setFilters((previous) => (previous.api === apiParam ? previous : { ...previous, api: apiParam }));
  }, [apiParam]);
  const query = queryOf(filters);
  const first = useApi(`activity/${JSON.stringify(query)}`, (signal) => client.GET('/api/v1/activity', { params: { query }, signal }), expired);
  const keys = useApi('keys', (signal) => client.GET('/api/v1/keys', { signal }), expired);
  const agentKeys = useApi('agent-keys', (signal) => client.GET('/api/v1/agent-keys', { signal }), expired);
  const [more, setMore] = useState<{ entries: ActivityEntry[]; cursor: string | null }>({ entries: [], cursor: null });
  const [moreError, setMoreError] = useState<unknown>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  useEffect(() => {
    setMore({ entries: [], cursor: first.data?.nextCursor ?? null });
    setMoreError(null);
  }, [first.data]);

  const apply = (event: FormEvent) => {
    event.preventDefault();
    setFilters(draft);
  };
  const loadMore = async () => {
    if (!more.cursor) return;
    setLoadingMore(true);
    setMoreError(null);
    try {
      const page = await call(client.GET('/api/v1/activity', { params: { query: { ...query, cursor: more.cursor } } }));
      setMore((previous) => ({ entries: [...previous.entries, ...page.activity], cursor: page.nextCursor }));
    } catch (error) {
      setMoreError(error);
    } finally {
      setLoadingMore(false);
    }
  };
  const entries = [...(first.data?.activity ?? []), ...more.entries];
  const allKeys = [
    ...(keys.data?.keys ?? []).map((key) => ({ id: key.id, label: key.name })),
    ...(agentKeys.data?.agentKeys ?? []).map((key) => ({ id: key.id, label: `${key.name} (agent)` })),
  ];

  return (
    <>
      <PageHeader
        title="Activity"
        description="Every metered call: what it cost, whether it was served, failed or refunded, and why. Calls show here a second or so after they end."
        actions={<MoneyTabs current="activity" />}
      />
      <Card title="Filter">
        <form className="form-grid" onSubmit={apply} aria-label="Filter activity">
          <div className="field">
            <label className="field-label" htmlFor="activity-outcome">
              Outcome
            </label>
            <select
              id="activity-outcome"
              value={draft.outcome}
              onChange={(e) => setDraft({ ...draft, outcome: e.target.value as Filters['outcome'] })}
            >
              <option value="">Any</option>
              <option value="served">Served</option>
              <option value="failed">Failed</option>
              <option value="refunded">Refunded</option>
            </select>
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-api">
              API id
            </label>
            <input id="activity-api" value={draft.api} onChange={(e) => setDraft({ ...draft, api: e.target.value })} placeholder="any" />
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-key">
              Key
            </label>
            <select id="activity-key" value={draft.key} onChange={(e) => setDraft({ ...draft, key: e.target.value })}>
              <option value="">Any</option>
              {allKeys.map((key) => (
                <option key={key.id} value={key.id}>
                  {key.label}
                </option>
              ))}
            </select>
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-status">
              Status
            </label>
            <input
              id="activity-status"
              value={draft.status}
              onChange={(e) => setDraft({ ...draft, status: e.target.value })}
              placeholder="e.g. 404 or 5xx"
              aria-describedby="activity-status-help"
            />
            <span className="field-help" id="activity-status-help">
              One status, or a class such as 4xx.
            </span>
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-since">
              From (UTC day)
            </label>
            <input id="activity-since" type="date" value={draft.since} onChange={(e) => setDraft({ ...draft, since: e.target.value })} />
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-until">
              To (UTC day, included)
            </label>
            <input id="activity-until" type="date" value={draft.until} onChange={(e) => setDraft({ ...draft, until: e.target.value })} />
          </div>
          <div className="field">
            <label className="field-label" htmlFor="activity-request">
              Request id
            </label>
            <input
              id="activity-request"
              value={draft.requestId}
              onChange={(e) => setDraft({ ...draft, requestId: e.target.value })}
              placeholder="any"
              aria-describedby="activity-request-help"
            />
            <span className="field-help" id="activity-request-help">
              The X-Request-Id header of a call&apos;s answer.
            </span>
          </div>
          <div className="form-actions">
            <button type="submit" className="button button-primary">
              Apply
            </button>
            <button
              type="button"
              className="button"
              onClick={() => {
                setDraft(NO_FILTERS);
                setFilters(NO_FILTERS);
              }}
            >
              Clear
            </button>
          </div>
        </form>
      </Card>
      <Card
        title="Calls"
        actions={
          <button type="button" className="button button-small" onClick={first.reload}>
            Refresh
          </button>
        }
      >
        <ErrorMessage error={first.error} onRetry={first.reload} />
        {first.loading && !first.data ? <Spinner label="Loading activity" /> : null}
        {first.data && entries.length === 0 ? (
          <Empty title="No calls match">
            Calls through the <Link href="/directory">directory's APIs</Link> show up here.
          </Empty>
        ) : null}
        {entries.length > 0 ? (
          <div className="table-scroll">
            <table className="table" data-testid="activity-table">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">API and request</th>
                  <th scope="col" className="num">
                    Status
                  </th>
                  <th scope="col">Outcome</th>
                  <th scope="col" className="num">
                    Cost
                  </th>
                  <th scope="col" className="num">
                    Latency
                  </th>
                  <th scope="col">Key</th>
                  <th scope="col">
                    <span className="visually-hidden">Details</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {entries.map((entry) => (
                  <CallRow key={entry.id} entry={entry} />
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
        <ErrorMessage error={moreError} onRetry={() => void loadMore()} />
        {more.cursor ? (
          <button type="button" className="button" disabled={loadingMore} onClick={() => void loadMore()}>
            {loadingMore ? 'Loading…' : 'Load more'}
          </button>
        ) : null}
      </Card>
    </>
  );
}
