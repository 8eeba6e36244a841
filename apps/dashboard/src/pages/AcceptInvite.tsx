import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ApiError, call, client, describeError } from '../api';
import { Link } from '../router';
import { accountFrom, signedInEmail, type Account } from '../session';
import { PASSWORD_HINT } from './Auth';

/**
 * The one-time token of an invitation link, `/accept-invite#token=…`. It rides in the fragment, which
 * browsers never send to the server, so no request log holds it. `missing` when the address has no
 * token at all, `damaged` when it is cut short or mangled (a link split over two lines in a mail app).
 */
export function inviteTokenFrom(hash: string): { token: string } | 'missing' | 'damaged' {
  const token = new URLSearchParams(hash.replace(/^#/, '')).get('token');
  if (!token) return 'missing';
  return /^[A-Za-z0-9_-]{20,200}$/.test(token) ? { token } : 'damaged';
}

const ASK_AGAIN = 'Ask the account owner to send the invitation again.';

/** A spent, expired or replaced link is the server's 400 not about the password; the password's own problems start with "Password". */
function acceptError(error: unknown): { text: string; linkProblem: boolean } {
  if (error instanceof ApiError && error.status === 400 && !error.message.startsWith('Password')) {
    if (error.message.startsWith('This invitation link')) {
      return {
        text: `This invitation link no longer works: it was used already, has expired, or a newer invitation replaced it. ${ASK_AGAIN}`,
        linkProblem: true,
      };
    }
    return { text: describeError(error), linkProblem: true };
  }
  return { text: describeError(error), linkProblem: false };
}

/**
 * Where an invitation e-mail's link leads: the invited person chooses a password and is signed in
 * as an approver of the inviting account. Public, so it renders signed out; someone already signed
 * in (say, the owner trying the link) is told that accepting switches the browser to the approver.
 */
export function AcceptInvitePage({ signedInAs, onSignedIn }: { signedInAs: Account | null; onSignedIn: (account: Account) => void }) {
  const [hash, setHash] = useState(() => window.location.hash);
  const [password, setPassword] = useState('');
  const [error, setError] = useState<{ text: string; linkProblem: boolean } | null>(null);
  const [busy, setBusy] = useState(false);
  const errorRef = useRef<HTMLDivElement>(null);
  const link = inviteTokenFrom(hash);

  useEffect(() => {
    document.title = 'Accept your invitation · Service dashboard';
    const update = () => {
      setHash(window.location.hash);
      setError(null);
    };
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  useEffect(() => {
    if (error) errorRef.current?.focus();
  }, [error]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (typeof link !== 'object') return;
    setBusy(true);
    setError(null);
    try {
      const signedIn = await call(client.POST('/api/auth/accept-invite', { body: { token: link.token, password } }));
      onSignedIn(accountFrom(signedIn));
    } catch (caught) {
      setError(acceptError(caught));
      setBusy(false);
    }
  };

  const problem =
    link === 'missing'
      ? 'This address has no invitation in it. Open the link from your invitation e-mail, all of it, including the part after “#token=”. If you cannot find the e-mail, ask the account owner to send the invitation again.'
      : link === 'damaged'
        ? 'This invitation link is incomplete or damaged. Copy the whole link from the e-mail into the address bar. If it still does not work, ask the account owner to send the invitation again.'
        : null;

  return (
    <main className="auth-page">
      <form className="auth-card" onSubmit={submit} aria-labelledby="accept-invite-title">
        <div className="brand brand-large">
          <span className="brand-mark" aria-hidden="true" />
          Service
        </div>
        <h1 id="accept-invite-title">Accept your invitation</h1>
        {problem ? (
          <div className="alert alert-error" role="alert">
            <p>{problem}</p>
          </div>
        ) : (
          <>
            <p className="muted">
              New to Service: choose a password. You then sign in with your e-mail address and this password to see and complete the steps the account
              owner shares with you.
            </p>
            <p className="muted" id="accept-existing">
              Already sign in to Service with this address? Enter that password: the account is added to your login, and you switch between your
              accounts at the top of the dashboard.
            </p>
            {signedInAs && (
              <div className="alert alert-info">
                <p>
                  You are signed in as {signedInEmail(signedInAs)}. Accepting the invitation signs this browser in as the invited approver instead.
                </p>
              </div>
            )}
            {error && (
              <div className="alert alert-error" role="alert" tabIndex={-1} ref={errorRef}>
                <p>{error.text}</p>
              </div>
            )}
            {!error?.linkProblem && (
              <>
                <div className="field">
                  <label className="field-label" htmlFor="accept-password">
                    Password
                  </label>
                  <input
                    id="accept-password"
                    type="password"
                    name="password"
                    autoComplete="new-password"
                    required
                    minLength={10}
                    maxLength={200}
                    value={password}
                    onChange={(e) => setPassword(e.target.value)}
                    aria-describedby="accept-password-help accept-existing"
                  />
                  <span className="field-help" id="accept-password-help">
                    {PASSWORD_HINT}
                  </span>
                </div>
                <button type="submit" className="button button-primary button-block" disabled={busy}>
                  {busy ? 'Please wait…' : 'Accept and sign in'}
                </button>
              </>
            )}
          </>
        )}
        <p className="auth-switch">
          Accepted already? <Link href="/signin">Sign in</Link>
        </p>
      </form>
    </main>
  );
}
