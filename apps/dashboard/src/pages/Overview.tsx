import { useMemo, useState, type FormEvent } from 'react';
import { api, ApiError } from '../api';
import { fillDays, UsageChart, type DayPoint } from '../chart';
import { formatDollars, formatNumber, formatPercent } from '../format';
import { Link } from '../router';
import { useSession } from '../session';
import { Card, Empty, ErrorMessage, Notice, PageHeader, Spinner, useApi } from '../ui';

interface Usage {
  days: number;
  totals: { calls: number; cost: number; errors: number };
  byDay: DayPoint[];
  byApi: { apiId: string; calls: number; cost: number; errors: number }[];
}

interface Stats {
  stats: { totalCalls: number; totalCost: number; errorRate: number; avgLatencyMs: number | null; p95LatencyMs: number | null; topApis: { apiId: string; calls: number; cost: number }[] };
}

const PERIODS = [7, 30, 90];

function TopUp({ onCredited }: { onCredited: () => void }) {
  const [amount, setAmount] = useState('10');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [credited, setCredited] = useState<number | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setCredited(null);
    try {
      // One idempotency key per click: a retried request after a dropped connection credits once.
      const body = await api<{ credited: number; balance: number }>('/balance', {
        method: 'POST',
        body: { amount: Number(amount) },
        headers: { 'idempotency-key': crypto.randomUUID() },
      });
      setCredited(body.credited);
      onCredited();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="inline-form" onSubmit={submit}>
      <label className="field field-inline">
        <span className="field-label">Amount in dollars</span>
        <input type="number" min="0.01" step="0.01" required value={amount} onChange={(e) => setAmount(e.target.value)} />
      </label>
      <button type="submit" className="button button-primary" disabled={busy}>
        {busy ? 'Adding…' : 'Add funds'}
      </button>
      {credited !== null && <Notice tone="success">{formatDollars(credited)} added to your balance.</Notice>}
      {error instanceof ApiError && error.status === 403 ? (
        <Notice tone="warning">{error.message}. {error.hint}</Notice>
      ) : (
        <ErrorMessage error={error} />
      )}
    </form>
  );
}

export function OverviewPage() {
  const { expired, account } = useSession();
  const [days, setDays] = useState(30);
  const balance = useApi<{ balance: number }>('/balance', expired);
  const usage = useApi<Usage>(`/usage?days=${days}`, expired);
  const stats = useApi<Stats>('/usage/stats', expired);
  const series = useMemo(() => (usage.data ? fillDays(usage.data.days, usage.data.byDay) : []), [usage.data]);
  const topApis = stats.data?.stats.topApis ?? usage.data?.byApi ?? [];
  const hasCalls = (stats.data?.stats.totalCalls ?? 0) > 0;

  return (
    <>
      <PageHeader title="Overview" description={`Signed in as ${account.email}.`} />
      <div className="grid grid-3">
        <Card title="Balance" className="stat-card">
          {balance.loading && !balance.data ? <Spinner /> : <p className="stat" data-testid="balance">{formatDollars(balance.data?.balance)}</p>}
          <ErrorMessage error={balance.error} onRetry={balance.reload} />
          <TopUp onCredited={balance.reload} />
          <p className="muted small">In sandbox billing (the local default) you can top yourself up for testing, up to a cap.</p>
        </Card>
        <Card title={`Calls, last ${days} days`} className="stat-card">
          {usage.loading && !usage.data ? <Spinner /> : <p className="stat">{formatNumber(usage.data?.totals.calls)}</p>}
          <p className="muted">Spend {formatDollars(usage.data?.totals.cost)}</p>
        </Card>
        <Card title="Error rate" className="stat-card">
          {stats.loading && !stats.data ? <Spinner /> : <p className="stat">{hasCalls ? formatPercent(stats.data?.stats.errorRate) : '—'}</p>}
          <p className="muted">
            {hasCalls && stats.data?.stats.avgLatencyMs != null
              ? `Average latency ${formatNumber(Math.round(stats.data.stats.avgLatencyMs))} ms${stats.data.stats.p95LatencyMs != null ? `, p95 ${formatNumber(Math.round(stats.data.stats.p95LatencyMs))} ms` : ''}`
              : 'Error rate and latency appear after your first calls.'}
          </p>
          <ErrorMessage error={stats.error} onRetry={stats.reload} />
        </Card>
      </div>
      <Card
        title="Spend and calls per day"
        actions={
          <div className="segmented" role="group" aria-label="Period">
            {PERIODS.map((period) => (
              <button key={period} type="button" className="button button-small" aria-pressed={days === period} onClick={() => setDays(period)}>
                {period} days
              </button>
            ))}
          </div>
        }
      >
        <ErrorMessage error={usage.error} onRetry={usage.reload} />
        {usage.loading && !usage.data ? <Spinner label="Loading usage" /> : null}
        {usage.data && usage.data.totals.calls === 0 ? (
          <Empty title="No calls in this period yet">
            Calls through the <Link href="/directory">directory's APIs</Link> show up here within seconds.
          </Empty>
        ) : null}
        {usage.data && usage.data.totals.calls > 0 ? <UsageChart days={series} /> : null}
        <p className="muted small">Usage is aggregated in the background and may lag your balance by a few seconds.</p>
      </Card>
      <Card title="Top APIs">
        {topApis.length === 0 ? (
          <Empty title="No API calls yet" />
        ) : (
          <table className="table">
            <thead>
              <tr>
                <th scope="col">API</th>
                <th scope="col" className="num">
                  Calls
                </th>
                <th scope="col" className="num">
                  Spend
                </th>
              </tr>
            </thead>
            <tbody>
              {topApis.slice(0, 10).map((row) => (
                <tr key={row.apiId}>
                  <td>
                    <Link href={`/directory/${encodeURIComponent(row.apiId)}`}>{row.apiId}</Link>
                  </td>
                  <td className="num">{formatNumber(row.calls)}</td>
                  <td className="num">{formatDollars(row.cost)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </>
  );
}
