import { useEffect, useState, type FormEvent } from 'react';
import { call, client, type Answer } from '../api';
import { formatDateTime } from '../format';
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
  const { expired } = useSession();
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
      expired();
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

/** The person's own settings: password, signed-in sessions and (for the owner) e-mail notifications. */
export function SettingsPage() {
  const { account } = useSession();
  return (
    <>
      <PageHeader title="Settings" description="Your login and how we reach you." />
      <ChangePasswordCard />
      <SessionsCard />
      {account.role === 'owner' && <EmailPreferencesCard />}
    </>
  );
}
