import { createContext, useContext } from 'react';

export interface Person {
  id: string;
  email: string;
}

/**
 * Who is signed in. `id` and `email` are the account's (its owner's); an approver signs in to the
 * owner's account as `member`, sees its human steps only, and `role` says which of the two it is.
 */
export interface Account {
  id: string;
  email: string;
  role: 'owner' | 'approver';
  /** The approver who signed in; null for the owner. */
  member: Person | null;
  /** Every account the signed-in person belongs to (one login, many accounts); the header switches between them. */
  accounts: AccountChoice[];
}

/** An account the person may switch to: the one they own, or one they approve for. */
export interface AccountChoice {
  id: string;
  email: string;
  role: 'owner' | 'approver';
  current: boolean;
}

/** What POST /api/auth/login, POST /api/auth/accept-invite and GET /api/auth/session answer about the person. */
export interface SignedInBody {
  account: Person;
  role?: 'owner' | 'approver';
  member?: Person | null;
  accounts?: AccountChoice[];
}

export function accountFrom(body: SignedInBody): Account {
  return { id: body.account.id, email: body.account.email, role: body.role ?? 'owner', member: body.member ?? null, accounts: body.accounts ?? [] };
}

/** The address of the person at the keyboard: the approver's own, or the owner's. */
export const signedInEmail = (account: Account) => account.member?.email ?? account.email;

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
