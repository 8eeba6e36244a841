import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ApiError, call, client, describeError, type Answer } from './api';
import { formatDateTime, formatDollars, formatRelative } from './format';
import { Link } from './router';
import type { SessionContextValue } from './session';
import { Badge, Card, ErrorMessage, Notice, Spinner, useAction, useApi, type Loaded } from './ui';

/**
 * Money on the overview: adding funds (credited at once in sandbox billing; a Stripe Checkout page
 * in live billing, credited when Stripe's webhook arrives), what happens when Stripe sends the
 * person back, the low-balance alert, and automatic top-up with a saved card.
 *
 * The edge does not tell the page which billing mode it runs in, so the page learns it from the
 * answers: POST /balance answers `credited` (sandbox) or `checkoutUrl` (live with Stripe), 403
 * live_billing means card payments are not set up, and Stripe only sends people back in live mode.
 */
export type BillingMode = 'sandbox' | 'live' | 'no-card-payments';

/** The automatic top-up state, as GET /api/v1/balance/auto-topup answers it. */
export type AutoTopup = Answer<'/api/v1/balance/auto-topup'>;

const MODE_KEY = 'billing-mode';
const PENDING_KEY = 'pending-topup';

/** What the page learnt about the billing mode in this tab, or null. */
export function rememberedBillingMode(): BillingMode | null {
  try {
    const value = window.sessionStorage.getItem(MODE_KEY);
    return value === 'sandbox' || value === 'live' || value === 'no-card-payments' ? value : null;
  } catch {
    return null;
  }
}

export function rememberBillingMode(mode: BillingMode): void {
  try {
    window.sessionStorage.setItem(MODE_KEY, mode);
  } catch {
    // Storage may be off (private windows); the page learns the mode again from the next answer.
  }
}

/** A live top-up the person left to pay for: the balance before it tells when Stripe's webhook credited it. */
interface PendingTopUp {
  topUpId: string;
  amount: number;
  balanceBefore: number | null;
}

function readPending(topUpId: string | null): PendingTopUp | null {
  if (!topUpId) return null;
  try {
    const parsed = JSON.parse(window.sessionStorage.getItem(PENDING_KEY) ?? 'null') as PendingTopUp | null;
    return parsed && parsed.topUpId === topUpId ? parsed : null;
  } catch {
    return null;
  }
}

function writePending(pending: PendingTopUp | null): void {
  try {
    if (pending) window.sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    else window.sessionStorage.removeItem(PENDING_KEY);
  } catch {
    // Without storage the return notice still works, from the balance it first sees.
  }
}

/** Where Stripe sent the person back to: `/?topup=succeeded|cancelled&topUpId=…` or `/?autotopup=saved|cancelled`. */
export type StripeReturn =
  { kind: 'topup'; outcome: 'succeeded' | 'cancelled'; topUpId: string | null } | { kind: 'autotopup'; outcome: 'saved' | 'cancelled' };

const RETURN_PARAMS = ['topup', 'topUpId', 'autotopup'];

export function readStripeReturn(search: string): StripeReturn | null {
  const params = new URLSearchParams(search);
  const topup = params.get('topup');
  if (topup === 'succeeded' || topup === 'cancelled') return { kind: 'topup', outcome: topup, topUpId: params.get('topUpId') };
  const autotopup = params.get('autotopup');
  if (autotopup === 'saved' || autotopup === 'cancelled') return { kind: 'autotopup', outcome: autotopup };
  return null;
}

/** Takes Stripe's query off the address (a reload or a shared link should not show the notice again). */
export function clearStripeReturn(): void {
  const url = new URL(window.location.href);
  if (!RETURN_PARAMS.some((name) => url.searchParams.has(name))) return;
  for (const name of RETURN_PARAMS) url.searchParams.delete(name);
  window.history.replaceState(window.history.state, '', `${url.pathname}${url.search}${url.hash}`);
}

/** Calls `poll` every `everyMs` while `active`, for at most `forMs`; answers whether the time ran out. */
function usePolling(active: boolean, poll: () => void, everyMs: number, forMs: number): boolean {
  const latest = useRef(poll);
  latest.current = poll;
  const [timedOut, setTimedOut] = useState(false);
  useEffect(() => {
    if (!active) return;
    const started = Date.now();
    const timer = window.setInterval(() => {
      if (Date.now() - started >= forMs) {
        window.clearInterval(timer);
        setTimedOut(true);
        return;
      }
      latest.current();
    }, everyMs);
    return () => window.clearInterval(timer);
  }, [active, everyMs, forMs]);
  return timedOut;
}

const POLL_EVERY_MS = 2_000;
const POLL_FOR_MS = 90_000;

function DismissButton({ onDismiss }: { onDismiss: () => void }) {
  return (
    <button type="button" className="button button-small" onClick={onDismiss}>
      Dismiss
    </button>
  );
}

/**
 * The notice after Stripe's page: a paid top-up waits for Stripe's webhook, so the balance is
 * fetched again every two seconds (for at most 90) until it went up; a saved card likewise waits
 * for the auto top-up state to say so.
 */
export function StripeReturnNotice({
  value,
  balance,
  autoTopup,
  onDismiss,
}: {
  value: StripeReturn;
  balance: Loaded<{ balance: number }>;
  autoTopup: Loaded<AutoTopup>;
  onDismiss: () => void;
}) {
  const [pending] = useState(() => (value.kind === 'topup' ? readPending(value.topUpId) : null));
  const current = balance.data?.balance ?? null;
  // Without the balance from before the payment (paid from another tab), the first one seen here is the baseline.
  const [firstSeen, setFirstSeen] = useState<number | null>(null);
  useEffect(() => {
    if (firstSeen === null && current !== null) setFirstSeen(current);
  }, [firstSeen, current]);
  const baseline = pending?.balanceBefore ?? firstSeen;
  const credited = value.kind === 'topup' && current !== null && baseline !== null && current > baseline;
  const cardSaved = value.kind === 'autotopup' && autoTopup.data?.cardSaved === true;

  const waitingForTopUp = value.kind === 'topup' && value.outcome === 'succeeded' && !credited;
  const waitingForCard = value.kind === 'autotopup' && value.outcome === 'saved' && !cardSaved;
  const timedOut = usePolling(waitingForTopUp || waitingForCard, waitingForTopUp ? balance.reload : autoTopup.reload, POLL_EVERY_MS, POLL_FOR_MS);

  useEffect(() => {
    // The top-up is over either way: paid and credited, or cancelled.
    if (value.kind === 'topup' && (credited || value.outcome === 'cancelled')) writePending(null);
  }, [value, credited]);

  const reference = value.kind === 'topup' && value.topUpId ? ` Reference: ${value.topUpId}.` : '';
  if (value.kind === 'topup' && value.outcome === 'cancelled') {
    return (
      <div className="alert alert-info return-notice" role="status">
        <p>Payment cancelled on Stripe's page: nothing was charged and your balance is unchanged.</p>
        <DismissButton onDismiss={onDismiss} />
      </div>
    );
  }
  if (value.kind === 'autotopup' && value.outcome === 'cancelled') {
    return (
      <div className="alert alert-info return-notice" role="status">
        <p>Saving a card was cancelled: no card was saved and nothing was charged.</p>
        <DismissButton onDismiss={onDismiss} />
      </div>
    );
  }
  if (value.kind === 'topup') {
    if (credited) {
      return (
        <div className="alert alert-success return-notice" role="status">
          <p>
            Stripe confirmed the payment{pending ? ` of ${formatDollars(pending.amount)}` : ''}: your balance is now{' '}
            <strong>{formatDollars(current)}</strong>.
          </p>
          <DismissButton onDismiss={onDismiss} />
        </div>
      );
    }
    return (
      <div className={`alert ${timedOut ? 'alert-warning' : 'alert-info'} return-notice`} role="status">
        <p>Payment received by Stripe; your balance updates when Stripe confirms it{pending ? ` (${formatDollars(pending.amount)})` : ''}.</p>
        {timedOut ? (
          <p>
            Stripe has not confirmed it yet. Most payments are confirmed within seconds, some payment methods take longer; the balance above shows it
            once Stripe does (reload the page later).{reference}
          </p>
        ) : (
          <Spinner label="Waiting for Stripe's confirmation" />
        )}
        <DismissButton onDismiss={onDismiss} />
      </div>
    );
  }
  if (cardSaved) {
    return (
      <div className="alert alert-success return-notice" role="status">
        <p>Stripe confirmed your card: automatic top-up can charge it now.</p>
        <DismissButton onDismiss={onDismiss} />
      </div>
    );
  }
  return (
    <div className={`alert ${timedOut ? 'alert-warning' : 'alert-info'} return-notice`} role="status">
      <p>Card details received by Stripe; automatic top-up can use the card when Stripe confirms it.</p>
      {timedOut ? <p>Stripe has not confirmed it yet; reload the page in a few minutes.</p> : <Spinner label="Waiting for Stripe's confirmation" />}
      <DismissButton onDismiss={onDismiss} />
    </div>
  );
}

const isLiveBillingRefusal = (error: unknown) => error instanceof ApiError && error.code === 'live_billing';

/**
 * Add funds. Sandbox: credited at once. Live: POST /balance answers Stripe's Checkout page, where
 * the browser goes; the balance before it is kept in this tab so the return notice knows when
 * Stripe's webhook has credited the payment.
 */
export function TopUpForm({
  balance,
  mode,
  onMode,
  onCredited,
}: {
  balance: number | null;
  mode: BillingMode | null;
  onMode: (mode: BillingMode) => void;
  onCredited: () => void;
}) {
  const [amount, setAmount] = useState('10');
  const { busy, error, run } = useAction();
  const [credited, setCredited] = useState<number | null>(null);
  const [leaving, setLeaving] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setCredited(null);
    await run(async () => {
      try {
        // One idempotency key per click: a retried request after a dropped connection credits (or starts a payment) once.
        const body = await call(
          client.POST('/api/v1/balance', { body: { amount: Number(amount) }, headers: { 'idempotency-key': crypto.randomUUID() } }),
        );
        if ('checkoutUrl' in body) {
          onMode('live');
          writePending({ topUpId: body.topUpId, amount: Number(amount), balanceBefore: balance });
          setLeaving(true);
          window.location.assign(body.checkoutUrl);
          return;
        }
        onMode('sandbox');
        setCredited(body.credited);
        onCredited();
      } catch (caught) {
        if (isLiveBillingRefusal(caught)) onMode('no-card-payments');
        throw caught;
      }
    });
  };
  const note =
    mode === 'live'
      ? "You pay by card on Stripe's page; your balance is credited when Stripe confirms the payment, usually within seconds."
      : mode === 'sandbox'
        ? 'In sandbox billing (the local default) you can top yourself up for testing, up to a cap.'
        : mode === null
          ? "In sandbox billing (the local default) you can top yourself up for testing, up to a cap; with live billing you pay by card on Stripe's page."
          : null;
  return (
    <>
      <form className="inline-form" onSubmit={submit}>
        <label className="field field-inline">
          <span className="field-label">Amount in dollars</span>
          <input type="number" min="0.01" step="0.01" required value={amount} onChange={(e) => setAmount(e.target.value)} />
        </label>
        <button type="submit" className="button button-primary" disabled={busy || leaving}>
          {busy ? 'Adding…' : leaving ? 'Opening Stripe…' : 'Add funds'}
        </button>
      </form>
      {leaving && <Spinner label="Taking you to Stripe's payment page" />}
      {credited !== null && <Notice tone="success">{formatDollars(credited)} added to your balance.</Notice>}
      {error instanceof ApiError && error.status === 403 ? (
        <div className="alert alert-warning" role="alert">
          <p>{describeError(error)}</p>
        </div>
      ) : (
        <ErrorMessage error={error} />
      )}
      {note && <p className="muted small">{note}</p>}
    </>
  );
}

/** The balance, and when it is below zero, why and what to do. */
export function BalanceFigure({ balance }: { balance: number | null | undefined }) {
  const negative = typeof balance === 'number' && balance < 0;
  return (
    <>
      <p className={`stat ${negative ? 'stat-negative' : ''}`} data-testid="balance">
        {formatDollars(balance)}
      </p>
      {negative && (
        <div className="alert alert-warning" role="status" data-testid="negative-balance">
          <p>
            <strong>{formatDollars(balance)}</strong> — a refunded or disputed payment was taken back. Add funds to keep calling APIs: calls are
            refused until the balance is above zero.
          </p>
        </div>
      )}
    </>
  );
}

/** The low-balance alert: a balance.low webhook event (and by default an e-mail) when a charge takes the balance below it. */
export function LowBalanceAlertCard({ onUnauthenticated }: { onUnauthenticated: SessionContextValue['expired'] }) {
  const alerts = useApi('balance/alerts', (signal) => client.GET('/api/v1/balance/alerts', { signal }), onUnauthenticated);
  const email = useApi('notifications/email', (signal) => client.GET('/api/v1/notifications/email', { signal }), onUnauthenticated);
  const emailed = email.data ? email.data.eventTypes.includes('balance.low') : null;
  return (
    <Card title="Low-balance alert" className="billing-card">
      <p className="muted small">
        When a charge takes your balance below this amount, a <code>balance.low</code> event goes to the webhook endpoints that listen for it (once
        per crossing; a top-up above the threshold re-arms it). Add an endpoint for it on the <Link href="/webhooks">Webhooks page</Link>.
        {emailed === true && ` It is also e-mailed to ${email.data?.email}.`}
        {emailed === false && ' It is not e-mailed (your e-mail notifications leave it out).'}
      </p>
      {alerts.loading && !alerts.data ? <Spinner label="Loading the alert" /> : null}
      <ErrorMessage error={alerts.error} onRetry={alerts.reload} />
      {alerts.data && <LowBalanceForm initial={alerts.data.lowBalanceThreshold} />}
    </Card>
  );
}

function LowBalanceForm({ initial }: { initial: number | null }) {
  const [threshold, setThreshold] = useState(initial === null ? '' : String(initial));
  const [saved, setSaved] = useState<{ threshold: number | null } | null>(null);
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setSaved(null);
    await run(async () => {
      const value = threshold.trim();
      const body = await call(client.PUT('/api/v1/balance/alerts', { body: { lowBalanceThreshold: value === '' ? null : value } }));
      setSaved({ threshold: body.lowBalanceThreshold });
      setThreshold(body.lowBalanceThreshold === null ? '' : String(body.lowBalanceThreshold));
    });
  };
  return (
    <>
      <form className="inline-form" onSubmit={submit}>
        <label className="field field-inline">
          <span className="field-label">Low-balance threshold in dollars</span>
          <input
            inputMode="decimal"
            value={threshold}
            onChange={(e) => setThreshold(e.target.value)}
            placeholder="off"
            pattern="\d+(\.\d{1,6})?"
            aria-describedby="low-balance-help"
          />
        </label>
        <button type="submit" className="button button-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save alert'}
        </button>
      </form>
      <p className="field-help" id="low-balance-help">
        Leave empty for no alert.
      </p>
      {saved && (
        <Notice tone="success">
          {saved.threshold === null
            ? 'Low-balance alert turned off.'
            : `Saved: you are alerted when your balance falls below ${formatDollars(saved.threshold)}.`}
        </Notice>
      )}
      <ErrorMessage error={error} />
    </>
  );
}

/**
 * Automatic top-up: its state, saving a card through Stripe Checkout in setup mode, and the
 * settings. Where billing is not live with Stripe the writes answer 403 live_billing; the card
 * says so in words and keeps the controls off.
 */
export function AutoTopupCard({ state, mode, onMode }: { state: Loaded<AutoTopup>; mode: BillingMode | null; onMode: (mode: BillingMode) => void }) {
  const [refusal, setRefusal] = useState<unknown>(null);
  const setup = useAction();
  const [leaving, setLeaving] = useState(false);
  const data = state.data;
  // The server says whether cards can be charged here; without that, what the page learnt.
  const unavailable = data?.available === false || refusal !== null || mode === 'sandbox' || mode === 'no-card-payments';
  const refused = (error: unknown) => {
    if (!isLiveBillingRefusal(error)) return false;
    setRefusal(error);
    if (mode !== 'sandbox') onMode('no-card-payments');
    return true;
  };

  const saveCard = () =>
    setup.run(async () => {
      try {
        const body = await call(client.POST('/api/v1/balance/auto-topup/setup'));
        onMode('live');
        setLeaving(true);
        window.location.assign(body.checkoutUrl);
      } catch (error) {
        if (!refused(error)) throw error;
      }
    });

  return (
    <Card
      title="Automatic top-up"
      className="billing-card"
      actions={
        <button type="button" className="button button-small" onClick={state.reload} disabled={state.loading}>
          Refresh
        </button>
      }
    >
      {!unavailable && (
        <p className="muted small">
          When a charge leaves your balance below the threshold, your saved card is charged the amount you choose, at most one attempt at a time. The
          balance is credited when Stripe confirms the payment.
        </p>
      )}
      {unavailable && (
        <div className="alert alert-info" role="status" data-testid="auto-topup-unavailable">
          <p>
            Automatic top-up is not available here: this service does not take card payments
            {mode === 'sandbox' ? ' (it runs with test money, which you add yourself)' : ''}. Add funds by hand in the Balance card instead.
          </p>
        </div>
      )}
      {state.loading && !data ? <Spinner label="Loading automatic top-up" /> : null}
      <ErrorMessage error={state.error} onRetry={state.reload} />
      {/* Nothing to set where cards cannot be charged: the controls show only where they work (or once set before). */}
      {data && (!unavailable || data.cardSaved || data.enabled) && (
        <>
          <dl className="facts" data-testid="auto-topup-state">
            <div>
              <dt>Card</dt>
              <dd>{data.cardSaved ? <Badge tone="green">Card saved</Badge> : <Badge tone="grey">No card saved</Badge>}</dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd>
                {data.inFlight ? (
                  <Badge tone="blue">Charging the card now</Badge>
                ) : data.enabled && data.cardSaved ? (
                  <Badge tone="green">On</Badge>
                ) : data.enabled ? (
                  <Badge tone="amber">On, waiting for a card</Badge>
                ) : (
                  <Badge tone="grey">Off</Badge>
                )}
              </dd>
            </div>
            <div>
              <dt>Rule</dt>
              <dd>
                {data.threshold !== null && data.amount !== null
                  ? `Below ${formatDollars(data.threshold)}, add ${formatDollars(data.amount)}`
                  : 'Not set'}
              </dd>
            </div>
          </dl>
          {data.inFlight && <p className="small">A top-up is being charged to your card; your balance updates when Stripe confirms it.</p>}
          {(data.failures > 0 || data.lastError) && <AutoTopupFailure state={data} />}
          <div className="button-row">
            <button type="button" className="button" onClick={() => void saveCard()} disabled={setup.busy || leaving || unavailable}>
              {setup.busy || leaving ? 'Opening Stripe…' : data.cardSaved ? 'Replace the saved card' : 'Save a card'}
            </button>
          </div>
          {leaving && <Spinner label="Taking you to Stripe to save a card" />}
          <ErrorMessage error={setup.error} />
          <AutoTopupForm initial={data} disabled={unavailable} onSaved={state.reload} onRefused={refused} />
        </>
      )}
    </Card>
  );
}

function AutoTopupFailure({ state }: { state: AutoTopup }) {
  const waiting = state.retryAfter !== null && new Date(state.retryAfter).getTime() > Date.now();
  return (
    <div className="alert alert-warning" role="status" data-testid="auto-topup-failure">
      <p>
        The last automatic top-up failed{state.lastError ? `: ${state.lastError.trim().replace(/\.+$/, '')}` : ''}.{' '}
        {state.failures > 1 ? `${state.failures} attempts in a row have failed. ` : ''}
        {waiting
          ? `The next attempt may happen ${formatRelative(state.retryAfter)} (${formatDateTime(state.retryAfter)}), at the next charge below the threshold.`
          : 'The next charge below the threshold tries again.'}{' '}
        Saving another card may help.
      </p>
    </div>
  );
}

function AutoTopupForm({
  initial,
  disabled,
  onSaved,
  onRefused,
}: {
  initial: AutoTopup;
  disabled: boolean;
  onSaved: () => void;
  onRefused: (error: unknown) => boolean;
}) {
  const [enabled, setEnabled] = useState(initial.enabled);
  const [threshold, setThreshold] = useState(initial.threshold === null ? '' : String(initial.threshold));
  const [amount, setAmount] = useState(initial.amount === null ? '' : String(initial.amount));
  const [saved, setSaved] = useState<AutoTopup | null>(null);
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setSaved(null);
    await run(async () => {
      try {
        const body = await call(client.PUT('/api/v1/balance/auto-topup', { body: { enabled, threshold: threshold.trim(), amount: amount.trim() } }));
        setSaved(body);
        onSaved();
      } catch (caught) {
        if (!onRefused(caught)) throw caught;
      }
    });
  };
  return (
    <form className="auto-topup-form" onSubmit={submit}>
      <label className="field field-check">
        <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} disabled={disabled} />
        <span className="field-label">Top up automatically</span>
      </label>
      <div className="form-grid">
        <label className="field">
          <span className="field-label">When the balance falls below (dollars)</span>
          <input
            inputMode="decimal"
            required
            value={threshold}
            onChange={(e) => setThreshold(e.target.value)}
            placeholder="e.g. 5"
            pattern="\d+(\.\d{1,6})?"
            disabled={disabled}
          />
        </label>
        <label className="field">
          <span className="field-label">Add this amount (dollars)</span>
          <input
            inputMode="decimal"
            required
            value={amount}
            onChange={(e) => setAmount(e.target.value)}
            placeholder="e.g. 20"
            pattern="\d+(\.\d{1,2})?"
            disabled={disabled}
          />
        </label>
      </div>
      <button type="submit" className="button button-primary" disabled={busy || disabled}>
        {busy ? 'Saving…' : 'Save automatic top-up'}
      </button>
      {saved && (
        <Notice tone="success">
          {saved.enabled
            ? `Automatic top-up is on: below ${formatDollars(saved.threshold)}, ${formatDollars(saved.amount)} is charged to your card.${saved.cardSaved ? '' : ' It starts once a card is saved.'}`
            : 'Automatic top-up is off; its settings are kept.'}
        </Notice>
      )}
      <ErrorMessage error={error} />
    </form>
  );
}
