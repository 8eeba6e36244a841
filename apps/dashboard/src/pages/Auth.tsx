import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ApiError, call, client, describeError } from '../api';
import { Link, navigate } from '../router';
import { accountFrom, type Account } from '../session';
import { rememberFreshKey } from '../first-run';
import { KeyReveal } from './Keys';

/** The password policy in a sentence, under every field where a person chooses a password. */
export const PASSWORD_HINT = '10 to 200 characters, not your email and not a common password. A long passphrase is best.';

/** Sign-in and sign-up errors in the words a person expects; other errors use the server's sentences. */
function authError(error: unknown, mode: 'signin' | 'signup'): string {
  if (error instanceof ApiError) {
    if (error.code === 'invalid_credentials') return 'The email or password is wrong. Check both and try again.';
    if (mode === 'signup' && error.status === 409) return 'An account with this email already exists. Sign in instead, or use another email.';
  }
  return describeError(error);
}

export function AuthPage({ mode, onSignedIn }: { mode: 'signin' | 'signup'; onSignedIn: (account: Account) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [firstKey, setFirstKey] = useState<{ account: Account; fullKey: string; balance: number } | null>(null);
  const errorRef = useRef<HTMLDivElement>(null);

  useEffect(() => {
    document.title = `${mode === 'signup' ? 'Create an account' : 'Sign in'} · Service dashboard`;
    setError(null);
  }, [mode]);
  useEffect(() => {
    if (error) errorRef.current?.focus();
  }, [error]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (mode === 'signup') {
        const registered = await call(client.POST('/api/v1/register', { body: { email, password } }));
        const login = await call(client.POST('/api/auth/login', { body: { email, password } }));
        setFirstKey({ account: accountFrom(login), fullKey: registered.fullKey, balance: registered.balance });
      } else {
        const login = await call(client.POST('/api/auth/login', { body: { email, password } }));
        onSignedIn(accountFrom(login));
      }
    } catch (caught) {
      setError(authError(caught, mode));
    } finally {
      setBusy(false);
    }
  };

  if (firstKey) {
    return (
      <main className="auth-page">
        <div className="auth-card auth-card-wide">
          <h1>Your account is ready</h1>
          <p>
            This is your first API key. Programs and agents send it as <code>Authorization: Bearer …</code>.
          </p>
          <KeyReveal fullKey={firstKey.fullKey} />
          <button
            type="button"
            className="button button-primary"
            onClick={() => {
              // The overview's first-run checklist fills its commands with this key (memory only).
              rememberFreshKey(firstKey.fullKey);
              navigate('/', { replace: true });
              onSignedIn(firstKey.account);
            }}
          >
            I have stored it — continue to the dashboard
          </button>
        </div>
      </main>
    );
  }

  return (
    <main className="auth-page">
      <form className="auth-card" onSubmit={submit} noValidate={false}>
        <div className="brand brand-large">
          <span className="brand-mark" aria-hidden="true" />
          Service
        </div>
        <h1>{mode === 'signup' ? 'Create an account' : 'Sign in'}</h1>
        {error && (
          <div className="alert alert-error" role="alert" tabIndex={-1} ref={errorRef}>
            <p>{error}</p>
          </div>
        )}
        <label className="field">
          <span className="field-label">Email</span>
          <input type="email" name="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <div className="field">
          <label className="field-label" htmlFor="auth-password">
            Password
          </label>
          <input
            id="auth-password"
            type="password"
            name="password"
            autoComplete={mode === 'signup' ? 'new-password' : 'current-password'}
            required
            minLength={mode === 'signup' ? 10 : 1}
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            aria-describedby={mode === 'signup' ? 'auth-password-help' : undefined}
          />
          {mode === 'signup' ? (
            <span className="field-help" id="auth-password-help">
              {PASSWORD_HINT}
            </span>
          ) : (
            <Link href="/forgot-password" className="field-help auth-forgot">
              Forgot password?
            </Link>
          )}
        </div>
        <button type="submit" className="button button-primary button-block" disabled={busy}>
          {busy ? 'Please wait…' : mode === 'signup' ? 'Create account' : 'Sign in'}
        </button>
        <p className="auth-switch">
          {mode === 'signup' ? (
            <>
              Already have an account? <Link href="/signin">Sign in</Link>
            </>
          ) : (
            <>
              New here? <Link href="/signup">Create an account</Link>
            </>
          )}
        </p>
      </form>
    </main>
  );
}
