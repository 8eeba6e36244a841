import { useCallback, useEffect, useRef, useState } from 'react';
import { call, client, describeError, isUnauthenticated } from './api';
import { AcceptInvitePage } from './pages/AcceptInvite';
import { ActivityPage } from './pages/Activity';
import { ApproversPage } from './pages/Approvers';
import { AuthPage } from './pages/Auth';
import { ConnectionsPage } from './pages/Connections';
import { ApiDetailPage, DirectoryPage } from './pages/Directory';
import { InboxPage } from './pages/Inbox';
import { KeysPage } from './pages/Keys';
import { McpConsentPage } from './pages/McpConsent';
import { OverviewPage } from './pages/Overview';
import { AccountDeletedPage, ConfirmEmailPage, VerifyEmailBanner, VerifyEmailPage } from './pages/EmailLinks';
import { ForgotPasswordPage, ResetPasswordPage } from './pages/ResetPassword';
import { SettingsPage } from './pages/Settings';
import { SessionDetailPage, SessionsPage } from './pages/Sessions';
import { StatementPage } from './pages/Statement';
import { WebhooksPage } from './pages/Webhooks';
import { Link, navigate, useLocation } from './router';
import { accountFrom, SessionContext, signedInEmail, type Account } from './session';
import { useInterval } from './live';
import { WAITING_STEPS_EVENT } from './waiting';
import { CookbooksPage } from './pages/Cookbooks';
import { Notice, Spinner } from './ui';

/** `approver`: also shown to approvers, who see and complete the account's human steps and nothing else. */
const NAV = [
  { href: '/', label: 'Overview', approver: false },
  { href: '/keys', label: 'Keys', approver: false },
  { href: '/connections', label: 'Connections', approver: false },
  { href: '/inbox', label: 'Inbox', approver: true },
  { href: '/sessions', label: 'Sessions', approver: true },
  { href: '/directory', label: 'Directory', approver: false },
  { href: '/approvers', label: 'Approvers', approver: false },
  { href: '/webhooks', label: 'Webhooks', approver: false },
];

/**
 * The header's account switcher, shown when the person belongs to more than one account (the one
 * they own, those they approve for). Switching opens a session in the chosen account.
 */
function AccountSwitcher({ account, onSwitched }: { account: Account; onSwitched: (account: Account) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  if (account.accounts.length < 2) return null;
  const choose = async (accountId: string) => {
    setBusy(true);
    setError(null);
    try {
      onSwitched(accountFrom(await call(client.POST('/api/auth/switch-account', { body: { accountId } }))));
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span className="account-switch">
      <label className="visually-hidden" htmlFor="account-switch">
        Account
      </label>
      <select id="account-switch" value={account.id} disabled={busy} onChange={(event) => void choose(event.target.value)}>
        {account.accounts.map((choice) => (
          <option key={choice.id} value={choice.id}>
            {choice.role === 'owner' ? `Your account (${choice.email})` : `Approver for ${choice.email}`}
          </option>
        ))}
      </select>
      {error ? (
        <span className="account-switch-error" role="alert">
          Switching failed: {describeError(error)}
        </span>
      ) : null}
    </span>
  );
}

const WAITING_POLL_MS = 10_000;

/**
 * The number of human steps waiting for the signed-in person (an approver sees theirs), for the
 * badge on Inbox: read on every page change, every few seconds while the tab is visible, and
 * whenever the Inbox page has read them itself (which stands in for the reads while it is open).
 */
function useWaitingSteps(path: string, enabled: boolean): number | null {
  const [count, setCount] = useState<number | null>(null);
  // The Inbox page reads the steps itself (live) and tells the badge: no second read while it is open.
  const onInbox = path === '/inbox';
  const load = useCallback(() => {
    if (!enabled || onInbox) return;
    call(client.GET('/api/v1/me/human-steps'))
      .then((body) => setCount(body.humanSteps.length))
      .catch(() => undefined);
  }, [enabled, onInbox]);
  useEffect(load, [load, path]);
  useInterval(load, WAITING_POLL_MS);
  useEffect(() => {
    const heard = (event: Event) => setCount((event as CustomEvent<number>).detail);
    window.addEventListener(WAITING_STEPS_EVENT, heard);
    return () => window.removeEventListener(WAITING_STEPS_EVENT, heard);
  }, []);
  return enabled ? count : null;
}

/** Pages that render signed out. The e-mailed links' pages (LINK_PATHS) render signed in too (see App). */
const PUBLIC_PATHS = new Set([
  '/signin',
  '/signup',
  '/accept-invite',
  '/forgot-password',
  '/reset-password',
  '/verify-email',
  '/confirm-email',
  '/account-deleted',
]);
/** Pages an e-mailed link opens (or deletion leads to): they stay whoever is signed in, as the link may be for someone else. */
const LINK_PATHS = new Set(['/accept-invite', '/reset-password', '/verify-email', '/confirm-email', '/account-deleted']);

/** The owner's pages: an approver who opens one (an old bookmark, a typed address) lands in the inbox. */
const isOwnerPage = (path: string) =>
  ['/', '/keys', '/oauth/consent', '/activity', '/statement', '/connections', '/approvers', '/webhooks', '/directory', '/cookbooks'].includes(path) ||
  path.startsWith('/directory/');

function Page({ path, role }: { path: string; role: Account['role'] }) {
  if (role === 'approver' && isOwnerPage(path)) return <InboxPage />;
  if (path === '/') return <OverviewPage />;
  if (path === '/keys') return <KeysPage />;
  if (path === '/oauth/consent') return <McpConsentPage />;
  if (path === '/activity') return <ActivityPage />;
  if (path === '/statement') return <StatementPage />;
  if (path === '/connections') return <ConnectionsPage />;
  if (path === '/inbox') return <InboxPage />;
  if (path === '/sessions') return <SessionsPage />;
  if (path.startsWith('/sessions/')) return <SessionDetailPage sessionId={decodeURIComponent(path.slice('/sessions/'.length))} />;
  if (path === '/approvers') return <ApproversPage />;
  if (path === '/webhooks') return <WebhooksPage />;
  if (path === '/settings') return <SettingsPage />;
  if (path === '/directory') return <DirectoryPage />;
  if (path === '/cookbooks') return <CookbooksPage />;
  if (path.startsWith('/directory/')) return <ApiDetailPage apiId={decodeURIComponent(path.slice('/directory/'.length))} />;
  return (
    <div className="card">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{path}</code>.{' '}
        {role === 'approver' ? <Link href="/inbox">Go to the inbox</Link> : <Link href="/">Go to the overview</Link>}.
      </p>
    </div>
  );
}

export function App() {
  const { path } = useLocation();
  const [account, setAccount] = useState<Account | null | undefined>(undefined);
  const [checkError, setCheckError] = useState<unknown>(null);
  const [signOutError, setSignOutError] = useState<unknown>(null);
  const [menuOpen, setMenuOpen] = useState(false);
  /** The owner's page an approver was sent away from, to say why they see the inbox instead. */
  const [ownerOnlyPath, setOwnerOnlyPath] = useState<string | null>(null);

  const check = useCallback(() => {
    setCheckError(null);
    call(client.GET('/api/auth/session'))
      .then((body) => setAccount(accountFrom(body)))
      .catch((error: unknown) => {
        if (isUnauthenticated(error)) setAccount(null);
        else setCheckError(error);
      });
  }, []);
  useEffect(check, [check]);
  const firstPath = useRef(path);
  useEffect(() => {
    setMenuOpen(false);
    // After a client-side navigation, move focus to the new page (as a full page load would), so
    // keyboard and screen-reader users start at its content rather than on the old link.
    if (path !== firstPath.current) document.getElementById('main')?.focus({ preventScroll: true });
  }, [path]);

  // Signed in on /signin or /signup (e.g. after signing in there): continue to the overview, or for
  // an approver to the inbox. /accept-invite and /reset-password stay: their links may be for someone
  // else than who is signed in (and a reset signs this browser out anyway).
  useEffect(() => {
    if (account && PUBLIC_PATHS.has(path) && !LINK_PATHS.has(path)) navigate(account.role === 'approver' ? '/inbox' : '/', { replace: true });
  }, [account, path]);

  // An approver on one of the owner's pages gets the inbox (Page renders it at once), under its own address.
  useEffect(() => {
    if (path !== '/inbox') setOwnerOnlyPath(null);
  }, [path]);
  useEffect(() => {
    if (account?.role !== 'approver' || !isOwnerPage(path)) return;
    setOwnerOnlyPath(path === '/' ? null : path);
    navigate('/inbox', { replace: true });
  }, [account, path]);

  const waiting = useWaitingSteps(path, Boolean(account));
  // A data call's 401 may be stale rather than the end of the session: a call sent with the cookie
  // of a session that switching accounts has just replaced (the switch ends the old one) answers 401
  // after the new cookie is set. So a 401 signs out only once the session itself says so; while it
  // still answers, the account stays (replaced only if it is another one) and the caller may call again.
  // The 401s of one moment (a page's several loads) share one check; a check that fails otherwise (429,
  // the network) cannot tell, and lets the caller try once more. A person signed out meanwhile stays out.
  const sessionCheck = useRef<Promise<boolean> | null>(null);
  const expired = useCallback(
    () =>
      (sessionCheck.current ??= call(client.GET('/api/auth/session'))
        .then(
          (body) => {
            const current = accountFrom(body);
            setAccount((shown) => (shown == null ? shown : shown.id === current.id && shown.role === current.role ? shown : current));
            return true;
          },
          (error: unknown) => {
            if (!isUnauthenticated(error)) return true;
            setAccount(null);
            return false;
          },
        )
        .finally(() => {
          sessionCheck.current = null;
        })),
    [],
  );
  const signedOut = useCallback(() => setAccount(null), []);
  const signOut = useCallback(async () => {
    setSignOutError(null);
    try {
      await call(client.POST('/api/auth/logout'));
      setAccount(null);
      navigate('/signin');
    } catch (error) {
      setSignOutError(error);
    }
  }, []);

  if (account === undefined) {
    return (
      <main className="center-page">
        {checkError ? (
          <div className="alert alert-error" role="alert">
            <p>{describeError(checkError)}</p>
            <button type="button" className="button" onClick={check}>
              Try again
            </button>
          </div>
        ) : (
          <Spinner label="Opening the dashboard" />
        )}
      </main>
    );
  }

  if (path === '/accept-invite') {
    return (
      <AcceptInvitePage
        signedInAs={account}
        onSignedIn={(signedIn) => {
          setAccount(signedIn);
          // Replaces the link's address, so Back does not lead to a spent token.
          navigate('/inbox', { replace: true });
        }}
      />
    );
  }
  // Setting a password by the e-mail link signs every session out, this browser's too.
  if (path === '/reset-password') return <ResetPasswordPage onSignedOut={() => setAccount(null)} />;
  // A verified or changed address shows in the header and Settings: read the session again.
  if (path === '/verify-email') return <VerifyEmailPage signedIn={account !== null} onDone={() => account && check()} />;
  if (path === '/confirm-email') return <ConfirmEmailPage signedIn={account !== null} onDone={() => account && check()} />;
  if (path === '/account-deleted') return <AccountDeletedPage />;
  if (account === null) {
    if (path === '/forgot-password') return <ForgotPasswordPage />;
    return <AuthPage mode={path === '/signup' ? 'signup' : 'signin'} onSignedIn={(signedIn) => setAccount(signedIn)} />;
  }
  if (PUBLIC_PATHS.has(path)) return null;
  const approver = account.role === 'approver';

  return (
    <SessionContext.Provider value={{ account, expired, signedOut, signOut }}>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <div className="topbar-inner">
          <Link href={approver ? '/inbox' : '/'} className="brand">
            <span className="brand-mark" aria-hidden="true" />
            Service
          </Link>
          <button
            type="button"
            className="button menu-toggle"
            aria-expanded={menuOpen}
            aria-controls="main-nav"
            onClick={() => setMenuOpen((open) => !open)}
          >
            Menu
          </button>
          <nav id="main-nav" className={`nav ${menuOpen ? 'nav-open' : ''}`} aria-label="Main">
            {NAV.filter((item) => !approver || item.approver).map((item) => {
              const current = item.href === '/' ? path === '/' : path === item.href || path.startsWith(`${item.href}/`);
              const count = item.href === '/inbox' && waiting !== null && waiting > 0 ? waiting : null;
              const countText = count === null ? '' : `${count} step${count === 1 ? '' : 's'} waiting for a person`;
              return (
                <Link
                  key={item.href}
                  href={item.href}
                  className="nav-link"
                  aria-current={current ? 'page' : undefined}
                  // The name stays the page's ("Inbox"); the count is its description.
                  aria-label={count === null ? undefined : item.label}
                  aria-describedby={count === null ? undefined : 'inbox-count'}
                  title={count === null ? undefined : countText}
                >
                  {item.label}
                  {count !== null && (
                    <span className="nav-count" id="inbox-count" data-testid="inbox-count" aria-label={countText}>
                      {count}
                    </span>
                  )}
                </Link>
              );
            })}
          </nav>
          <div className="account">
            <span className="account-who">
              {/* The address opens Settings (password, sessions, e-mails): no extra button, so the bar stays one row at 1280 px. */}
              <Link
                href="/settings"
                className="account-email account-settings"
                title={`Settings for ${signedInEmail(account)}`}
                aria-label={`Settings, signed in as ${signedInEmail(account)}`}
                aria-current={path === '/settings' ? 'page' : undefined}
                data-testid="signed-in-email"
              >
                {signedInEmail(account)}
              </Link>
              {approver && (
                <span className="account-role" title={`Approver for ${account.email}`}>
                  Approver for {account.email}
                </span>
              )}
            </span>
            <AccountSwitcher
              account={account}
              onSwitched={(switched) => {
                setAccount(switched);
                navigate(switched.role === 'approver' ? '/inbox' : '/');
              }}
            />
            <button type="button" className="button button-small" onClick={() => void signOut()}>
              Sign out
            </button>
          </div>
        </div>
      </header>
      <main id="main" className="content" tabIndex={-1}>
        {signOutError ? (
          <div className="alert alert-error" role="alert">
            <p>Signing out failed: {describeError(signOutError)}</p>
          </div>
        ) : null}
        {approver && ownerOnlyPath && path === '/inbox' ? (
          <Notice>
            <p>
              The page <code>{ownerOnlyPath}</code> is for the account owner only. As an approver you see the Inbox and Sessions.
            </p>
          </Notice>
        ) : null}
        {!approver && <VerifyEmailBanner key={`verify-${account.id}`} />}
        {/* Keyed by account: a switch reloads every page's data for the account now current. */}
        <Page key={account.id} path={path} role={account.role} />
      </main>
    </SessionContext.Provider>
  );
}
