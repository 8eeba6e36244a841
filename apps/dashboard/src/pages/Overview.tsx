import { useCallback, useEffect, useMemo, useState } from 'react';
import {
  AutoTopupCard,
  BalanceFigure,
  clearStripeReturn,
  LowBalanceAlertCard,
  readStripeReturn,
  rememberBillingMode,
  rememberedBillingMode,
  StripeReturnNotice,
  TopUpForm,
  type BillingMode,
} from '../billing';
import { client } from '../api';
import { fillDays, UsageChart } from '../chart';
import { FirstRunChecklist } from '../first-run';
import { formatDollars, formatNumber, formatPercent } from '../format';
import { Link } from '../router';
import { useSession } from '../session';
import { ApiLink, Card, Empty, ErrorMessage, PageHeader, Spinner, useApi } from '../ui';

const PERIODS = [7, 30, 90];

export function OverviewPage() {
  const { expired, account } = useSession();
  const [days, setDays] = useState(30);
  const balance = useApi('balance', (signal) => client.GET('/api/v1/balance', { signal }), expired);
  const usage = useApi(`usage/${days}`, (signal) => client.GET('/api/v1/usage', { params: { query: { days } }, signal }), expired);
  const stats = useApi('usage/stats', (signal) => client.GET('/api/v1/usage/stats', { signal }), expired);
  const series = useMemo(() => (usage.data ? fillDays(usage.data.days, usage.data.byDay) : []), [usage.data]);
  const topApis = stats.data?.stats.topApis ?? usage.data?.byApi ?? [];
  const hasCalls = (stats.data?.stats.totalCalls ?? 0) > 0;
  const autoTopup = useApi('balance/auto-topup', (signal) => client.GET('/api/v1/balance/auto-topup', { signal }), expired);
  // Stripe sends people back here with ?topup=… or ?autotopup=…: read once, then taken off the address.
  const [stripeReturn, setStripeReturn] = useState(() => readStripeReturn(window.location.search));
  useEffect(clearStripeReturn, []);
  // Only live billing sends people to Stripe and back; otherwise what this tab learnt before.
  const [mode, setModeState] = useState<BillingMode | null>(() => (stripeReturn ? 'live' : rememberedBillingMode()));
  const setMode = useCallback((next: BillingMode) => {
    rememberBillingMode(next);
    setModeState(next);
  }, []);
  useEffect(() => {
    if (stripeReturn) rememberBillingMode('live');
  }, [stripeReturn]);
  // A saved card means Stripe is (or was) configured.
  useEffect(() => {
    if (mode === null && autoTopup.data?.cardSaved) setMode('live');
  }, [mode, autoTopup.data, setMode]);

  return (
    <>
      <PageHeader title="Overview" description={`Signed in as ${account.email}.`} />
      {stripeReturn && <StripeReturnNotice value={stripeReturn} balance={balance} autoTopup={autoTopup} onDismiss={() => setStripeReturn(null)} />}
      <FirstRunChecklist onUnauthenticated={expired} />
      <div className="grid grid-3">
        <Card title="Balance" className="stat-card">
          {balance.loading && !balance.data ? <Spinner /> : <BalanceFigure balance={balance.data?.balance} />}
          <ErrorMessage error={balance.error} onRetry={balance.reload} />
          <TopUpForm balance={balance.data?.balance ?? null} mode={mode} onMode={setMode} onCredited={balance.reload} />
          <p className="small">
            Every call in <Link href="/activity">Activity</Link>; every movement of your balance in the <Link href="/statement">Statement</Link>.
          </p>
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
      <div className="grid grid-2">
        <LowBalanceAlertCard onUnauthenticated={expired} />
        <AutoTopupCard state={autoTopup} mode={mode} onMode={setMode} />
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
                    <ApiLink apiId={row.apiId} />
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
