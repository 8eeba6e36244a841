import { createContext, useContext } from 'react';

export interface Account {
  id: string;
  email: string;
}

export interface SessionContextValue {
  account: Account;
  /** Called when the server says the cookie no longer works. */
  expired: () => void;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<SessionContextValue | null>(null);

export function useSession(): SessionContextValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error('useSession outside a signed-in page');
  return value;
}

/** The Temporal UI's address, injected by the edge into index.html. */
export function temporalUiUrl(): string | null {
  const content = document.querySelector('meta[name="temporal-ui-url"]')?.getAttribute('content');
  return content ? content.replace(/\/+$/, '') : null;
}
