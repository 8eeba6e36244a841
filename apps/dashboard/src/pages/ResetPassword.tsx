import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ApiError, call, client, describeError } from '../api';
import { Link } from '../router';
import { PASSWORD_HINT } from './Auth';
import { inviteTokenFrom } from './AcceptInvite';

function AuthCard({ title, children, onSubmit }: { title: string; children: React.ReactNode; onSubmit?: (event: FormEvent) => void }) {
  return (
    <main className="auth-page">
      <form className="auth-card" onSubmit={onSubmit ?? ((event) => event.preventDefault())} aria-labelledby="auth-card-title">
        <div className="brand brand-large">
          <span className="brand-mark" aria-hidden="true" />
          Service
        </div>
        <h1 id="auth-card-title">{title}</h1>
        {children}
      </form>
    </main>
  );
}

function useFocusedError() {
  const [error, setError] = useState<string | null>(null);
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (error) ref.current?.focus();
  }, [error]);
  const view = error ? (
    <div className="alert alert-error" role="alert" tabIndex={-1} ref={ref}>
      <p>{error}</p>
    </div>
  ) : null;
  return { error, setError, view };
}

/**
 * "Forgot password?": asks for a reset link by e-mail. The answer is the same whether or not the
 * address signs in here, so the page says what happens if it does.
 */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [sentTo, setSentTo] = useState<string | null>(null);
  const { setError, view } = useFocusedError();

  useEffect(() => {
    document.title = 'Forgot password · Service dashboard';
  }, []);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await call(client.POST('/api/auth/password-reset', { body: { email } }));
      setSentTo(email);
    } catch (caught) {
      setError(describeError(caught));
    } finally {
      setBusy(false);
    }
  };

  if (sentTo) {
    return (
      <AuthCard title="Check your e-mail">
        <div className="alert alert-success" role="status">
          <p>
            If <strong>{sentTo}</strong> signs in to Service, an e-mail with a link to choose a new password is on its way. The link works once, for
            an hour.
          </p>
        </div>
        <p className="muted">No e-mail after a few minutes? Look in the spam folder, check the address, or ask again: only the newest link works.</p>
        <p className="auth-switch">
          Remembered it? <Link href="/signin">Sign in</Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Forgot your password?" onSubmit={submit}>
      <p className="muted">Enter the e-mail address you sign in with. We send you a link to choose a new password.</p>
      {view}
      <label className="field">
        <span className="field-label">Email</span>
        <input type="email" name="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
      </label>
      <button type="submit" className="button button-primary button-block" disabled={busy}>
        {busy ? 'Please wait…' : 'Send the link'}
      </button>
      <p className="auth-switch">
        Remembered it? <Link href="/signin">Sign in</Link>
      </p>
    </AuthCard>
  );
}

/**
 * Where a reset e-mail's link leads, `/reset-password#token=…` (the token rides in the fragment, which
 * browsers never send to the server). Setting the password signs the person out everywhere, this
 * browser included; they then sign in with the new password.
 */
export function ResetPasswordPage({ onSignedOut }: { onSignedOut: () => void }) {
  const [hash, setHash] = useState(() => window.location.hash);
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [linkProblem, setLinkProblem] = useState(false);
  const [doneFor, setDoneFor] = useState<string | null>(null);
  const { setError, view } = useFocusedError();
  const link = inviteTokenFrom(hash);

  useEffect(() => {
    document.title = 'Choose a new password · Service dashboard';
    const update = () => {
      setHash(window.location.hash);
      setError(null);
      setLinkProblem(false);
    };
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, [setError]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (typeof link !== 'object') return;
    setBusy(true);
    setError(null);
    try {
      const done = await call(client.POST('/api/auth/password-reset/confirm', { body: { token: link.token, password } }));
      // The token is spent: drop it from the address bar and history.
      window.history.replaceState(null, '', '/reset-password');
      setDoneFor(done.email);
      onSignedOut();
    } catch (caught) {
      const aboutLink = caught instanceof ApiError && caught.status === 400 && caught.message.startsWith('This password reset link');
      setLinkProblem(aboutLink);
      setError(
        aboutLink
          ? 'This link no longer works: it was used already, has expired, or a newer e-mail replaced it. Ask for a new link.'
          : describeError(caught),
      );
      setBusy(false);
    }
  };

  if (doneFor) {
    return (
      <AuthCard title="Your new password is set">
        <div className="alert alert-success" role="status">
          <p>You are signed out everywhere. Sign in as {doneFor} with your new password.</p>
        </div>
        <Link href="/signin" className="button button-primary button-block">
          Sign in
        </Link>
      </AuthCard>
    );
  }
  const problem =
    link === 'missing'
      ? 'This address has no reset link in it. Open the link from the e-mail, all of it, including the part after “#token=”.'
      : link === 'damaged'
        ? 'This reset link is incomplete or damaged. Copy the whole link from the e-mail into the address bar.'
        : null;
  return (
    <AuthCard title="Choose a new password" onSubmit={submit}>
      {problem ? (
        <div className="alert alert-error" role="alert">
          <p>{problem}</p>
        </div>
      ) : (
        <>
          <p className="muted">Setting a new password signs you out of the dashboard everywhere. Your API keys keep working.</p>
          {view}
          {!linkProblem && (
            <>
              <div className="field">
                <label className="field-label" htmlFor="reset-password">
                  New password
                </label>
                <input
                  id="reset-password"
                  type="password"
                  name="password"
                  autoComplete="new-password"
                  required
                  minLength={10}
                  maxLength={200}
                  value={password}
                  onChange={(e) => setPassword(e.target.value)}
                  aria-describedby="reset-password-help"
                />
                <span className="field-help" id="reset-password-help">
                  {PASSWORD_HINT}
                </span>
              </div>
              <button type="submit" className="button button-primary button-block" disabled={busy}>
                {busy ? 'Please wait…' : 'Set the new password'}
              </button>
            </>
          )}
        </>
      )}
      <p className="auth-switch">
        {problem || linkProblem ? <Link href="/forgot-password">Ask for a new link</Link> : <Link href="/signin">Back to sign in</Link>}
      </p>
    </AuthCard>
  );
}
