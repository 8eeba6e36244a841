import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer, type CallResult } from '../api';
import { formatDateTime, formatDollars, formatNumber } from '../format';
import { useSession } from '../session';
import { Badge, Card, Empty, ErrorMessage, PageHeader, Spinner, useApi } from '../ui';
import { MoneyTabs } from './Activity';

type StatementAnswer = Answer<'/api/v1/statement'>;
type Entry = StatementAnswer['entries'][number];

/**
 * One page of the statement as JSON. The route can also answer CSV (its 200 lists both media types);
 * the client asks for JSON (Accept: application/json), so the answer is the JSON one.
 */
const statementPage = (query: Record<string, string>, signal?: AbortSignal) =>
  client.GET('/api/v1/statement', { params: { query }, signal }) as Promise<CallResult<StatementAnswer>>;

const KIND_LABEL: Record<Entry['kind'], string> = {
  signup_credit: 'Sign-up credit',
  topup: 'Top-up',
  charge: 'Charge',
  refund: 'Refund',
  adjustment: 'Adjustment',
  clawback: 'Clawback',
  x402_credit: 'x402 payment',
  forfeit: 'Given up at deletion',
};
const KIND_TONE: Record<Entry['kind'], 'green' | 'grey' | 'red' | 'amber' | 'blue'> = {
  signup_credit: 'green',
  topup: 'green',
  charge: 'grey',
  refund: 'blue',
  adjustment: 'amber',
  clawback: 'red',
  x402_credit: 'green',
  forfeit: 'red',
};

interface Period {
  from: string;
  to: string;
}

/** The period as the route's query: whole UTC days, `to` included (the route's bound is the next day). */
function queryOf(period: Period) {
  const nextDay = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return { ...(period.from ? { from: period.from } : {}), ...(period.to ? { to: nextDay(period.to) } : {}) };
}

/** Every ledger movement with the balance after it; its total over all time is the balance. */
export function StatementPage() {
  const { expired } = useSession();
  const [draft, setDraft] = useState<Period>({ from: '', to: '' });
  const [period, setPeriod] = useState<Period>({ from: '', to: '' });
  const query = queryOf(period);
  const first = useApi(`statement/${JSON.stringify(query)}`, (signal) => statementPage(query, signal), expired);
  const [more, setMore] = useState<{ entries: Entry[]; cursor: string | null }>({ entries: [], cursor: null });
  const [moreError, setMoreError] = useState<unknown>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  useEffect(() => {
    setMore({ entries: [], cursor: first.data?.nextCursor ?? null });
    setMoreError(null);
  }, [first.data]);

  const apply = (event: FormEvent) => {
    event.preventDefault();
    setPeriod(draft);
  };
  const loadMore = async () => {
    if (!more.cursor) return;
    setLoadingMore(true);
    setMoreError(null);
    try {
      const page = await call(statementPage({ ...query, cursor: more.cursor }));
      setMore((previous) => ({ entries: [...previous.entries, ...page.entries], cursor: page.nextCursor }));
    } catch (error) {
      setMoreError(error);
    } finally {
      setLoadingMore(false);
    }
  };
  const entries = [...(first.data?.entries ?? []), ...more.entries];
  const summary = first.data?.summary;
  // The CSV is a download of the same route (the session cookie goes with it).
  const csvHref = `/api/v1/statement?${new URLSearchParams({ ...query, format: 'csv' }).toString()}`;

  return (
    <>
      <PageHeader
        title="Statement"
        description="Every movement of your balance: top-ups, charges, refunds, credits and clawbacks, each with the balance after it."
        actions={
          <>
            <MoneyTabs current="statement" />
            <a className="button" href={csvHref} download data-testid="statement-csv">
              Download CSV
            </a>
          </>
        }
      />
      <Card title="Period">
        <form className="form-grid" onSubmit={apply} aria-label="Statement period">
          <div className="field">
            <label className="field-label" htmlFor="statement-from">
              From (UTC day)
            </label>
            <input id="statement-from" type="date" value={draft.from} onChange={(e) => setDraft({ ...draft, from: e.target.value })} />
          </div>
          <div className="field">
            <label className="field-label" htmlFor="statement-to">
              To (UTC day, included)
            </label>
            <input id="statement-to" type="date" value={draft.to} onChange={(e) => setDraft({ ...draft, to: e.target.value })} />
          </div>
          <div className="form-actions">
            <button type="submit" className="button button-primary">
              Show
            </button>
            <button
              type="button"
              className="button"
              onClick={() => {
                setDraft({ from: '', to: '' });
                setPeriod({ from: '', to: '' });
              }}
            >
              All time
            </button>
          </div>
        </form>
      </Card>
      <ErrorMessage error={first.error} onRetry={first.reload} />
      {summary ? (
        <div className="grid grid-3">
          <Card title="Opening balance" className="stat-card">
            <p className="stat">{summary.openingBalance === null ? '—' : formatDollars(summary.openingBalance)}</p>
          </Card>
          <Card title="In and out" className="stat-card">
            <p className="stat">{formatDollars(summary.net)}</p>
            <p className="muted">
              {formatDollars(summary.credits)} in, {formatDollars(-summary.debits)} out, {formatNumber(summary.entries)} entries
            </p>
          </Card>
          <Card title="Closing balance" className="stat-card">
            <p className="stat" data-testid="statement-closing">
              {summary.closingBalance === null ? '—' : formatDollars(summary.closingBalance)}
            </p>
          </Card>
        </div>
      ) : null}
      <Card title="Entries">
        {first.loading && !first.data ? <Spinner label="Loading the statement" /> : null}
        {first.data && entries.length === 0 ? <Empty title="No movements in this period" /> : null}
        {entries.length > 0 ? (
          <div className="table-scroll">
            <table className="table" data-testid="statement-table">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Description</th>
                  <th scope="col" className="num">
                    Amount
                  </th>
                  <th scope="col" className="num">
                    Balance after
                  </th>
                </tr>
              </thead>
              <tbody>
                {entries.map((entry) => (
                  <tr key={entry.id} data-testid="statement-row" data-kind={entry.kind}>
                    <td>{formatDateTime(entry.at)}</td>
                    <td>
                      <Badge tone={KIND_TONE[entry.kind]}>{KIND_LABEL[entry.kind]}</Badge>
                    </td>
                    <td>
                      {entry.apiId ? <code>{entry.apiId}</code> : null} {entry.description ?? entry.item ?? ''}
                      {entry.refundOf ? <div className="muted small">returns charge {entry.refundOf}</div> : null}
                      {entry.holdId ? <div className="muted small">charged from a credit hold</div> : null}
                    </td>
                    <td className="num">{formatDollars(entry.amount)}</td>
                    <td className="num">{formatDollars(entry.balanceAfter)}</td>
                  </tr>
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
