import { useEffect, useState } from 'react';
import { ApiError, call, client, describeError } from '../api';
import { Link } from '../router';
import { useSession } from '../session';
import { Notice, useApi } from '../ui';
import { inviteTokenFrom } from './AcceptInvite';

function LinkCard({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <main className="auth-page">
      <section className="auth-card" aria-labelledby="link-card-title">
        <div className="brand brand-large">
          <span className="brand-mark" aria-hidden="true" />
          Service
        </div>
        <h1 id="link-card-title">{title}</h1>
        {children}
      </section>
    </main>
  );
}

/** The token of a link page's address (after #token=), following later changes of the fragment. */
function useLinkToken() {
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const update = () => setHash(window.location.hash);
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return inviteTokenFrom(hash);
}

const linkProblem = (link: ReturnType<typeof inviteTokenFrom>) =>
  link === 'missing'
    ? 'This address has no link in it. Open the link from the e-mail, all of it, including the part after “#token=”.'
    : link === 'damaged'
      ? 'This link is incomplete or damaged. Copy the whole link from the e-mail into the address bar.'
      : null;

/**
 * One page for both e-mailed links about an address. The person presses the button (nothing happens
 * on load, so a mail scanner that opens links spends nothing); the token is then dropped from the
 * address bar. Works signed in or out: the link may be opened on another device.
 */
function EmailLinkPage(props: {
  path: '/verify-email' | '/confirm-email';
  title: string;
  intro: string;
  action: string;
  spentPrefix: string;
  spentText: string;
  submit: (token: string) => Promise<string>;
  signedIn: boolean;
  onDone: () => void;
}) {
  const link = useLinkToken();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ text: string; spent: boolean } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const token = typeof link === 'object' ? link.token : link;

  useEffect(() => {
    document.title = `${props.title} · Service dashboard`;
  }, [props.title]);
  // Another link opened in this tab (only the fragment changed, so the page did not reload): start over.
  useEffect(() => {
    setError(null);
  }, [token]);

  const go = async () => {
    if (typeof link !== 'object') return;
    setBusy(true);
    setError(null);
    try {
      const message = await props.submit(link.token);
      window.history.replaceState(null, '', props.path);
      setDone(message);
      props.onDone();
    } catch (caught) {
      const spent = caught instanceof ApiError && caught.status === 400 && caught.message.startsWith(props.spentPrefix);
      setError({ text: spent ? props.spentText : describeError(caught), spent });
    } finally {
      setBusy(false);
    }
  };

  const next = props.signedIn ? (
    <Link href="/settings" className="button button-primary button-block">
      Go to Settings
    </Link>
  ) : (
    <Link href="/signin" className="button button-primary button-block">
      Sign in
    </Link>
  );

  if (done) {
    return (
      <LinkCard title={props.title}>
        <div className="alert alert-success" role="status">
          <p>{done}</p>
        </div>
        {next}
      </LinkCard>
    );
  }
  const problem = linkProblem(link);
  return (
    <LinkCard title={props.title}>
      {problem ? (
        <div className="alert alert-error" role="alert">
          <p>{problem}</p>
        </div>
      ) : (
        <>
          <p className="muted">{props.intro}</p>
          {error && (
            <div className="alert alert-error" role="alert">
              <p>{error.text}</p>
            </div>
          )}
          {!error?.spent && (
            <button type="button" className="button button-primary button-block" disabled={busy} onClick={() => void go()}>
              {busy ? 'Please wait…' : props.action}
            </button>
          )}
        </>
      )}
      <p className="auth-switch">{props.signedIn ? <Link href="/settings">Back to Settings</Link> : <Link href="/signin">Back to sign in</Link>}</p>
    </LinkCard>
  );
}

/** Where a verification e-mail's link leads: `/verify-email#token=…`. */
export function VerifyEmailPage({ signedIn, onDone }: { signedIn: boolean; onDone: () => void }) {
  return (
    <EmailLinkPage
      path="/verify-email"
      title="Verify your e-mail address"
      intro="Confirm that this address is yours. Verified accounts can add funds and invite approvers."
      action="Verify my address"
      spentPrefix="This verification link"
      spentText="This link no longer works: it was used already, has expired, or a newer e-mail replaced it. Sign in and send a new link from Settings."
      submit={async (token) => {
        const answer = await call(client.POST('/api/auth/verify-email', { body: { token } }));
        return `${answer.email} is verified. You can now add funds and invite approvers.`;
      }}
      signedIn={signedIn}
      onDone={onDone}
    />
  );
}

/** Where the e-mail sent to a new address leads: `/confirm-email#token=…`; the change happens here. */
export function ConfirmEmailPage({ signedIn, onDone }: { signedIn: boolean; onDone: () => void }) {
  return (
    <EmailLinkPage
      path="/confirm-email"
      title="Confirm your new e-mail address"
      intro="From then on you sign in with this address and account e-mails come here. Your old address is told."
      action="Use this address"
      spentPrefix="This confirmation link"
      spentText="This link no longer works: it was used already, has expired, or the change was cancelled or asked for again. Sign in and change the address again from Settings."
      submit={async (token) => {
        const answer = await call(client.POST('/api/auth/email-change/confirm', { body: { token } }));
        return `You now sign in as ${answer.email}. We told ${answer.previousEmail} about the change.`;
      }}
      signedIn={signedIn}
      onDone={onDone}
    />
  );
}

/** Where the dashboard goes after the account was deleted: says what happened, signed out. */
export function AccountDeletedPage() {
  useEffect(() => {
    document.title = 'Account deleted · Service dashboard';
  }, []);
  return (
    <LinkCard title="Your account is deleted">
      <div className="alert alert-success" role="status">
        <p>Its keys no longer work, you are signed out everywhere, and nobody can sign in with your address any more.</p>
      </div>
      <p className="muted">
        The record of its payments and charges is kept, without your address, as bookkeeping law requires. A last e-mail confirms the deletion.
      </p>
      <Link href="/signup" className="button button-block">
        Create a new account
      </Link>
    </LinkCard>
  );
}

/**
 * Shown to an owner whose address is not verified where verification is required: what waits on it
 * and where to get a new link.
 */
export function VerifyEmailBanner() {
  const { account, expired } = useSession();
  const info = useApi(account.role === 'owner' ? `account-${account.id}` : null, (signal) => client.GET('/api/v1/account', { signal }), expired);
  const state = info.data?.account;
  if (!state || state.emailVerified || !state.verificationRequired) return null;
  return (
    <Notice tone="warning">
      <p>
        Verify your e-mail address: open the link we sent to <strong>{state.email}</strong>. Until then you can use everything free and spend your
        sign-up credit, but not add funds or invite approvers. <Link href="/settings">Send a new link</Link>
      </p>
    </Notice>
  );
}
