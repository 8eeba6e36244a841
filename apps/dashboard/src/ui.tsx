import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { call, describeError, isUnauthenticated, type CallResult } from './api';
import { Link } from './router';
import type { SessionContextValue } from './session';

export function Spinner({ label = 'Loading' }: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" /> {label}…
    </p>
  );
}

export function ErrorMessage({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  return (
    <div className="alert alert-error" role="alert">
      <p>{describeError(error)}</p>
      {onRetry && (
        <button type="button" className="button button-small" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Notice({ children, tone = 'info' }: { children: ReactNode; tone?: 'info' | 'success' | 'warning' }) {
  return (
    <div className={`alert alert-${tone}`} role={tone === 'success' ? 'status' : undefined}>
      {children}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children && <div className="empty-body">{children}</div>}
    </div>
  );
}

export function Badge({ tone, children }: { tone: 'green' | 'grey' | 'red' | 'amber' | 'blue'; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

export function Card({ title, actions, children, className }: { title?: ReactNode; actions?: ReactNode; children: ReactNode; className?: string }) {
  return (
    <section className={`card ${className ?? ''}`}>
      {(title || actions) && (
        <header className="card-header">
          {title && <h2>{title}</h2>}
          {actions && <div className="card-actions">{actions}</div>}
        </header>
      )}
      {children}
    </section>
  );
}

export function PageHeader({ title, description, actions }: { title: string; description?: ReactNode; actions?: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · Service dashboard`;
  }, [title]);
  return (
    <header className="page-header">
      <div>
        <h1>{title}</h1>
        {description && <p className="muted">{description}</p>}
      </div>
      {actions && <div className="page-actions">{actions}</div>}
    </header>
  );
}

/** Copies text to the clipboard, falling back to selecting it when the clipboard is unavailable; `onCopied` runs after a copy that worked. */
export function CopyButton({ text, label = 'Copy', onCopied }: { text: string; label?: string; onCopied?: () => void }) {
  const [copied, setCopied] = useState<'no' | 'yes' | 'failed'>('no');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied('yes');
      onCopied?.();
    } catch {
      setCopied('failed');
    }
  };
  return (
    <button type="button" className="button button-small" onClick={copy} aria-live="polite">
      {copied === 'yes' ? 'Copied' : copied === 'failed' ? 'Select and copy manually' : label}
    </button>
  );
}

export interface Loaded<T> {
  data: T | null;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads with a typed client call and keeps the latest answer. `key` names what `load` fetches (its path
 * and parameters): the call is made once per key (and again on `reload`), and not at all while the key is
 * null. A 401 goes to `onUnauthenticated` (the session's `expired`), which signs out once the session check
 * agrees; when the person is still signed in (the 401 was a stale call's), the call is made once more.
 *
 *     const balance = useApi('balance', (signal) => client.GET('/api/v1/balance', { signal }), expired);
 */
export function useApi<T>(
  key: string | null,
  load: (signal: AbortSignal) => Promise<CallResult<T>>,
  onUnauthenticated?: SessionContextValue['expired'],
): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean }>({ data: null, error: null, loading: key !== null });
  const [version, setVersion] = useState(0);
  const signOut = useRef(onUnauthenticated);
  signOut.current = onUnauthenticated;
  const loader = useRef(load);
  loader.current = load;
  // The version of the load a 401 the session check overruled starts: that load's own 401 is shown, not retried.
  const retryOf = useRef(-1);
  useEffect(() => {
    if (key === null) return;
    const retry = retryOf.current === version;
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true, error: null }));
    const failed = (error: unknown) => setState((previous) => ({ data: previous.data, error, loading: false }));
    call(loader.current(controller.signal))
      .then((data) => setState({ data, error: null, loading: false }))
      .catch((error: unknown) => {
        if ((error as Error).name === 'AbortError') return;
        const check = isUnauthenticated(error) ? signOut.current?.() : undefined;
        if (!check || retry) return failed(error);
        check.then(
          (stillSignedIn) => {
            if (controller.signal.aborted) return;
            if (!stillSignedIn) return failed(error);
            retryOf.current = version + 1;
            setVersion(version + 1);
          },
          () => failed(error),
        );
      });
    return () => controller.abort();
  }, [key, version]);
  const reload = useCallback(() => setVersion((v) => v + 1), []);
  return { ...state, reload };
}

/**
 * The state of a form's or button's server call: `run` clears the last error, marks the call busy,
 * awaits it and keeps what it threw for an ErrorMessage.
 */
export function useAction(): { busy: boolean; error: unknown; run: (action: () => Promise<void>) => Promise<void> } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run };
}

/** Asks before a destructive action, inline (no browser dialog), and keeps focus inside. */
export function ConfirmButton({
  label,
  confirmLabel,
  question,
  onConfirm,
  disabled,
}: {
  label: string;
  confirmLabel: string;
  question: string;
  onConfirm: () => Promise<void> | void;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const confirmRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" className="button button-small button-danger-outline" onClick={() => setAsking(true)} disabled={disabled}>
        {label}
      </button>
    );
  }
  return (
    <span className="confirm" role="group" aria-label={question}>
      <span className="confirm-question">{question}</span>
      <button
        ref={confirmRef}
        type="button"
        className="button button-small button-danger"
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          try {
            await onConfirm();
          } finally {
            setBusy(false);
            setAsking(false);
          }
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" className="button button-small" onClick={() => setAsking(false)} disabled={busy}>
        Cancel
      </button>
    </span>
  );
}

/**
 * Priced items that belong to no directory API show in usage under reserved ids (platform.docs,
 * platform.cookbooks): they name what was bought and lead where it can be seen, not to a directory
 * page that does not exist.
 */
const PLATFORM_ITEMS: Record<string, { label: string; href: string }> = {
  'platform.docs': { label: 'Documentation sections', href: '/activity?api=platform.docs' },
  'platform.cookbooks': { label: 'Cookbook details', href: '/cookbooks' },
};

/** An API id as a link: to its directory page, or for the platform's own items to where they can be seen. */
export function ApiLink({ apiId }: { apiId: string }) {
  const item = PLATFORM_ITEMS[apiId];
  if (item) return <Link href={item.href}>{item.label}</Link>;
  if (apiId.startsWith('platform.')) return <span>Platform: {apiId.slice('platform.'.length)}</span>;
  return <Link href={`/directory/${encodeURIComponent(apiId)}`}>{apiId}</Link>;
}
