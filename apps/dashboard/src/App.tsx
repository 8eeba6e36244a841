import { useCallback, useEffect, useRef, useState } from 'react';
import { api, describeError, isUnauthenticated } from './api';
import { AuthPage } from './pages/Auth';
import { ConnectionsPage } from './pages/Connections';
import { ApiDetailPage, DirectoryPage } from './pages/Directory';
import { InboxPage } from './pages/Inbox';
import { KeysPage } from './pages/Keys';
import { OverviewPage } from './pages/Overview';
import { SessionDetailPage, SessionsPage } from './pages/Sessions';
import { Link, navigate, useLocation } from './router';
import { SessionContext, type Account } from './session';
import { Spinner } from './ui';

const NAV = [
  { href: '/', label: 'Overview' },
  { href: '/keys', label: 'Keys' },
  { href: '/connections', label: 'Connections' },
  { href: '/inbox', label: 'Inbox' },
  { href: '/sessions', label: 'Sessions' },
  { href: '/directory', label: 'Directory' },
];

const PUBLIC_PATHS = new Set(['/signin', '/signup']);

function Page({ path }: { path: string }) {
  if (path === '/') return <OverviewPage />;
  if (path === '/keys') return <KeysPage />;
  if (path === '/connections') return <ConnectionsPage />;
  if (path === '/inbox') return <InboxPage />;
  if (path === '/sessions') return <SessionsPage />;
  if (path.startsWith('/sessions/')) return <SessionDetailPage sessionId={decodeURIComponent(path.slice('/sessions/'.length))} />;
  if (path === '/directory') return <DirectoryPage />;
  if (path.startsWith('/directory/')) return <ApiDetailPage apiId={decodeURIComponent(path.slice('/directory/'.length))} />;
  return (
    <div className="card">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{path}</code>. <Link href="/">Go to the overview</Link>.
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

  const check = useCallback(() => {
    setCheckError(null);
    api<{ account: Account }>('/api/auth/session')
      .then((body) => setAccount(body.account))
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

  // Signed in on /signin or /signup (e.g. after signing in there): continue to the overview.
  useEffect(() => {
    if (account && PUBLIC_PATHS.has(path)) navigate('/', { replace: true });
  }, [account, path]);

  const expired = useCallback(() => setAccount(null), []);
  const signOut = useCallback(async () => {
    setSignOutError(null);
    try {
      await api('/api/auth/logout', { method: 'POST' });
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

  if (account === null) {
    return <AuthPage mode={path === '/signup' ? 'signup' : 'signin'} onSignedIn={(signedIn) => setAccount(signedIn)} />;
  }
  if (PUBLIC_PATHS.has(path)) return null;

  return (
    <SessionContext.Provider value={{ account, expired, signOut }}>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <div className="topbar-inner">
          <Link href="/" className="brand">
            <span className="brand-mark" aria-hidden="true" />
            Service
          </Link>
          <button type="button" className="button menu-toggle" aria-expanded={menuOpen} aria-controls="main-nav" onClick={() => setMenuOpen((open) => !open)}>
            Menu
          </button>
          <nav id="main-nav" className={`nav ${menuOpen ? 'nav-open' : ''}`} aria-label="Main">
            {NAV.map((item) => {
              const current = item.href === '/' ? path === '/' : path === item.href || path.startsWith(`${item.href}/`);
              return (
                <Link key={item.href} href={item.href} className="nav-link" aria-current={current ? 'page' : undefined}>
                  {item.label}
                </Link>
              );
            })}
          </nav>
          <div className="account">
            <span className="account-email" title={account.email}>
              {account.email}
            </span>
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
        <Page path={path} />
      </main>
    </SessionContext.Provider>
  );
}
