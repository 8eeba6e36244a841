import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime, formatDollars } from '../format';
import { navigate } from '../router';
import { signedInEmail, useSession } from '../session';
import { Badge, Card, ConfirmButton, ErrorMessage, Notice, PageHeader, Spinner, useAction, useApi } from '../ui';
import { PASSWORD_HINT } from './Auth';

type SignedInSession = Answer<'/api/auth/sessions'>['sessions'][number];
type EmailedEvent = Answer<'/api/v1/notifications/email'>['eventTypes'][number];

/** The account events that can also be e-mailed, in a person's words. */
const EMAILED_EVENTS: { type: EmailedEvent; label: string }[] = [
  { type: 'balance.low', label: 'The balance falls below your low-balance alert' },
  { type: 'balance.depleted', label: 'The balance runs out' },
  { type: 'topup.succeeded', label: 'Funds were added' },
  { type: 'session.completed', label: 'A cookbook session finished' },
  { type: 'session.failed', label: 'A cookbook session failed' },
  { type: 'session.expired', label: 'A cookbook session expired waiting for a person' },
  { type: 'key.revoked', label: 'An API key was revoked' },
];

/** A User-Agent in a few words: the browser and the system, as far as the string says. */
export function describeBrowser(userAgent: string | null): string {
  if (!userAgent) return 'Unknown browser';
  const browser = /Edg\//.test(userAgent)
    ? 'Edge'
    : /Firefox\//.test(userAgent)
      ? 'Firefox'
      : /Chrome\/|Chromium\//.test(userAgent)
        ? 'Chrome'
        : /Safari\//.test(userAgent)
          ? 'Safari'
          : null;
  const system = /Windows/.test(userAgent)
    ? 'Windows'
    : /iPhone|iPad/.test(userAgent)
      ? 'iOS'
      : /Mac OS X/.test(userAgent)
        ? 'macOS'
        : /Android/.test(userAgent)
          ? 'Android'
          : /Linux/.test(userAgent)
            ? 'Linux'
            : null;
  if (!browser && !system) return userAgent.slice(0, 60);
  return [browser ?? 'A browser', system && `on ${system}`].filter(Boolean).join(' ');
}

function ChangePasswordCard() {
  const { account } = useSession();
  const [currentPassword, setCurrent] = useState('');
  const [newPassword, setNew] = useState('');
  const [done, setDone] = useState<number | null>(null);
  const { busy, error, run } = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setDone(null);
    await run(async () => {
      const answer = await call(client.POST('/api/auth/password', { body: { currentPassword, newPassword } }));
      setCurrent('');
      setNew('');
      setDone(answer.sessionsEnded);
    });
  };
  return (
    <Card title="Password">
      <p className="muted small">
        You sign in as <strong>{signedInEmail(account)}</strong>. Changing the password signs you out everywhere else; this browser stays signed in.
      </p>
      <form className="stack-form" onSubmit={submit}>
        <label className="field">
          <span className="field-label">Current password</span>
          <input
            type="password"
            name="current-password"
            autoComplete="current-password"
            required
            value={currentPassword}
            onChange={(e) => setCurrent(e.target.value)}
          />
        </label>
        <div className="field">
          <label className="field-label" htmlFor="settings-new-password">
            New password
          </label>
          <input
            id="settings-new-password"
            type="password"
            name="new-password"
            autoComplete="new-password"
            required
            minLength={10}
            maxLength={200}
            value={newPassword}
            onChange={(e) => setNew(e.target.value)}
            aria-describedby="settings-new-password-help"
          />
          <span className="field-help" id="settings-new-password-help">
            {PASSWORD_HINT}
          </span>
        </div>
        <div>
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Saving…' : 'Change password'}
          </button>
        </div>
      </form>
      <ErrorMessage error={error} />
      {done !== null && (
        <Notice tone="success">
          <p>
            Your password is changed.{' '}
            {done === 0 ? 'No other session was signed in.' : `${done} other ${done === 1 ? 'session was' : 'sessions were'} signed out.`}
          </p>
        </Notice>
      )}
    </Card>
  );
}

function SessionsCard() {
  const { expired, signedOut } = useSession();
  const sessions = useApi('auth/sessions', (signal) => client.GET('/api/auth/sessions', { signal }), expired);
  const [message, setMessage] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const others = (sessions.data?.sessions ?? []).filter((s) => !s.current).length;

  const signOutOthers = () =>
    run(async () => {
      const answer = await call(client.POST('/api/auth/sessions/revoke-all', { body: { includeCurrent: false } }));
      setMessage(`${answer.sessionsEnded} ${answer.sessionsEnded === 1 ? 'session was' : 'sessions were'} signed out. This browser stays signed in.`);
      sessions.reload();
    });
  const signOutEverywhere = () =>
    run(async () => {
      await call(client.POST('/api/auth/sessions/revoke-all', { body: { includeCurrent: true } }));
      signedOut();
      navigate('/signin');
    });

  return (
    <Card title="Signed-in sessions">
      <p className="muted small">
        Every browser signed in to the dashboard with your login, in any of your accounts. API keys are not sessions: revoke those on the Keys page.
      </p>
      {sessions.loading && !sessions.data ? <Spinner label="Loading your sessions" /> : null}
      <ErrorMessage error={sessions.error} onRetry={sessions.reload} />
      {sessions.data && (
        <ul className="key-list" aria-label="Signed-in sessions">
          {sessions.data.sessions.map((session: SignedInSession) => (
            <li key={session.id} className="key-item" data-testid="session-row">
              <div className="key-main">
                <p className="key-name">
                  {describeBrowser(session.userAgent)} {session.current && <Badge tone="green">This browser</Badge>}
                </p>
                <p className="key-meta">
                  {session.role === 'owner' ? `your account (${session.account.email})` : `approver for ${session.account.email}`} · signed in{' '}
                  {formatDateTime(session.createdAt)} · until {formatDateTime(session.expiresAt)}
                </p>
              </div>
            </li>
          ))}
        </ul>
      )}
      {message && (
        <Notice tone="success">
          <p>{message}</p>
        </Notice>
      )}
      <ErrorMessage error={error} />
      <div className="settings-actions">
        <ConfirmButton
          label="Sign out all other sessions"
          confirmLabel="Yes, sign them out"
          question={`Sign out ${others} other ${others === 1 ? 'session' : 'sessions'}?`}
          disabled={busy || others === 0}
          onConfirm={signOutOthers}
        />
        <ConfirmButton
          label="Sign out everywhere"
          confirmLabel="Yes, sign out everywhere"
          question="Sign out every session, this browser too?"
          disabled={busy}
          onConfirm={signOutEverywhere}
        />
      </div>
    </Card>
  );
}

function EmailPreferencesCard() {
  const { expired } = useSession();
  const preferences = useApi('notifications/email', (signal) => client.GET('/api/v1/notifications/email', { signal }), expired);
  const [chosen, setChosen] = useState<Set<EmailedEvent> | null>(null);
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  useEffect(() => {
    if (preferences.data) setChosen(new Set(preferences.data.eventTypes));
  }, [preferences.data]);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!chosen) return;
    setSaved(false);
    await run(async () => {
      const answer = await call(client.PUT('/api/v1/notifications/email', { body: { eventTypes: [...chosen] } }));
      setChosen(new Set(answer.eventTypes));
      setSaved(true);
    });
  };
  return (
    <Card title="E-mail notifications">
      {preferences.loading && !preferences.data ? <Spinner label="Loading your e-mail choices" /> : null}
      <ErrorMessage error={preferences.error} onRetry={preferences.reload} />
      {preferences.data && chosen && (
        <form onSubmit={submit}>
          <fieldset className="fieldset-plain">
            <legend className="muted small">
              E-mail {preferences.data.email} when… (steps waiting for a person, failed automatic top-ups and security notices are always e-mailed)
            </legend>
            {EMAILED_EVENTS.map(({ type, label }) => (
              <label key={type} className="event-choice">
                <input
                  type="checkbox"
                  checked={chosen.has(type)}
                  onChange={(e) => {
                    const next = new Set(chosen);
                    if (e.target.checked) next.add(type);
                    else next.delete(type);
                    setChosen(next);
                    setSaved(false);
                  }}
                />
                <span>{label}</span>
              </label>
            ))}
          </fieldset>
          <button type="submit" className="button button-primary" disabled={busy}>
            {busy ? 'Saving…' : 'Save e-mail choices'}
          </button>
        </form>
      )}
      <ErrorMessage error={error} />
      {saved && (
        <Notice tone="success">
          <p>Your e-mail choices are saved.</p>
        </Notice>
      )}
    </Card>
  );
}

/**
 * The address the person signs in with: whether it is verified (a new link for an owner who has not
 * opened theirs), and changing it, which takes effect only once the new address confirms.
 */
function EmailAddressCard() {
  const { account, expired } = useSession();
  const state = useApi('auth/email', (signal) => client.GET('/api/auth/email', { signal }), expired);
  const [newEmail, setNewEmail] = useState('');
  const [password, setPassword] = useState('');
  const [message, setMessage] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const data = state.data;

  const resend = () =>
    run(async () => {
      setMessage(null);
      const answer = await call(client.POST('/api/v1/account/verification-email', { body: {} }));
      setMessage(answer.message);
    });
  const change = async (event: FormEvent) => {
    event.preventDefault();
    setMessage(null);
    await run(async () => {
      const answer = await call(client.POST('/api/auth/email-change', { body: { newEmail, password } }));
      setNewEmail('');
      setPassword('');
      setMessage(answer.message);
      state.reload();
    });
  };
  const cancel = () =>
    run(async () => {
      setMessage(null);
      await call(client.DELETE('/api/auth/email-change'));
      setMessage('The change is cancelled; its link no longer works.');
      state.reload();
    });

  return (
    <Card title="E-mail address">
      {state.loading && !data ? <Spinner label="Loading your address" /> : null}
      <ErrorMessage error={state.error} onRetry={state.reload} />
      {data && (
        <>
          <p data-testid="email-state">
            You sign in as <strong>{data.email}</strong>{' '}
            {data.emailVerified ? <Badge tone="green">Verified</Badge> : <Badge tone="amber">Not verified</Badge>}
          </p>
          {!data.emailVerified && (
            <div className="settings-actions">
              <p className="muted small">
                Open the link we e-mailed to this address. Until then the account can use everything free and spend its sign-up credit, but cannot add
                funds or invite approvers.
              </p>
              {account.role === 'owner' && (
                <button type="button" className="button button-small" disabled={busy} onClick={() => void resend()}>
                  Send the verification link again
                </button>
              )}
            </div>
          )}
          {data.pendingEmail && (
            <Notice>
              <p>
                Waiting for confirmation: open the link we sent to <strong>{data.pendingEmail}</strong>. Until then you sign in as {data.email}.{' '}
                <button type="button" className="button button-small" disabled={busy} onClick={() => void cancel()}>
                  Cancel the change
                </button>
              </p>
            </Notice>
          )}
          <form className="stack-form" onSubmit={change}>
            <label className="field">
              <span className="field-label">New e-mail address</span>
              <input
                type="email"
                name="new-email"
                autoComplete="email"
                required
                maxLength={254}
                value={newEmail}
                onChange={(e) => setNewEmail(e.target.value)}
              />
            </label>
            <div className="field">
              <label className="field-label" htmlFor="email-change-password">
                Password for the change
              </label>
              <input
                id="email-change-password"
                type="password"
                name="email-change-password"
                autoComplete="current-password"
                required
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                aria-describedby="email-change-help"
              />
              <span className="field-help" id="email-change-help">
                We send a link to the new address; the change happens when you open it, and we tell the old address.
              </span>
            </div>
            <div>
              <button type="submit" className="button button-primary" disabled={busy}>
                {busy ? 'Please wait…' : 'Change e-mail address'}
              </button>
            </div>
          </form>
        </>
      )}
      <ErrorMessage error={error} />
      {message && (
        <Notice tone="success">
          <p>{message}</p>
        </Notice>
      )}
    </Card>
  );
}

/**
 * Deleting the account, for its owner: what goes, what stays (the ledger), and what becomes of the
 * balance, which is given up (not paid back) and must be confirmed.
 */
function DeleteAccountCard() {
  const { expired, signedOut } = useSession();
  const info = useApi('account', (signal) => client.GET('/api/v1/account', { signal }), expired);
  const [password, setPassword] = useState('');
  const [forfeit, setForfeit] = useState(false);
  const [asking, setAsking] = useState(false);
  const { busy, error, run } = useAction();
  const balance = info.data?.account.balance ?? 0;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!asking) {
      setAsking(true);
      return;
    }
    await run(async () => {
      await call(client.DELETE('/api/v1/account', { body: { password, forfeitBalance: forfeit } }));
      navigate('/account-deleted', { replace: true });
      signedOut();
    });
  };

  return (
    <Card title="Delete the account" className="danger-zone">
      <p className="muted small">
        Deleting is permanent. Every key stops working, every signed-in session ends, running cookbook sessions are cancelled, your approvers are
        removed, and your connections, webhooks and address are erased. Your login ends too, with any accounts you approve for. The record of payments
        and charges is kept, without your address, as bookkeeping law requires.
      </p>
      <ErrorMessage error={info.error} onRetry={info.reload} />
      <form className="stack-form" onSubmit={submit}>
        {balance > 0 && (
          <label className="event-choice">
            <input type="checkbox" required checked={forfeit} onChange={(e) => setForfeit(e.target.checked)} />
            <span>{`I give up the ${formatDollars(balance)} left on the balance. It is not paid back.`}</span>
          </label>
        )}
        <label className="field">
          <span className="field-label">Password to delete the account</span>
          <input
            type="password"
            name="delete-password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </label>
        <div className="settings-actions">
          {asking && <span className="confirm-question">This cannot be undone. Delete the account now?</span>}
          <button type="submit" className="button button-danger" disabled={busy || info.loading}>
            {busy ? 'Deleting…' : asking ? 'Yes, delete the account' : 'Delete the account'}
          </button>
          {asking && (
            <button type="button" className="button button-small" onClick={() => setAsking(false)}>
              Keep it
            </button>
          )}
        </div>
      </form>
      <ErrorMessage error={error} />
    </Card>
  );
}

/**
 * The person's own settings: address (verified, changed), password, signed-in sessions, and for the
 * owner e-mail notifications and deleting the account.
 */
export function SettingsPage() {
  const { account } = useSession();
  return (
    <>
      <PageHeader title="Settings" description="Your login and how we reach you." />
      <EmailAddressCard />
      <ChangePasswordCard />
      <SessionsCard />
      {account.role === 'owner' && <EmailPreferencesCard />}
      {account.role === 'owner' && <DeleteAccountCard />}
    </>
  );
}
