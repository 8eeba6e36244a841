import { createContext, useContext } from 'react';
import type { Answer } from './api';

/** What GET /api/auth/session, POST /api/auth/login and POST /api/auth/accept-invite answer about who signed in. */
type SignedInBody =
  | Answer<'/api/auth/session'>
  | Answer<'/api/auth/login', 'post'>
  | Answer<'/api/auth/accept-invite', 'post'>
  | Answer<'/api/auth/switch-account', 'post'>;

export type Person = SignedInBody['account'];

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
export type AccountChoice = NonNullable<Answer<'/api/auth/session'>['accounts']>[number];

export function accountFrom(body: SignedInBody): Account {
  const accounts = 'accounts' in body && Array.isArray(body.accounts) ? body.accounts : [];
  return { id: body.account.id, email: body.account.email, role: body.role, member: body.member, accounts };
}

/** The address of the person at the keyboard: the approver's own, or the owner's. */
export const signedInEmail = (account: Account) => account.member?.email ?? account.email;

export interface SessionContextValue {
  account: Account;
  /**
   * Called when a call answers 401: signs out once the session check agrees (the 401 may be a stale call's,
   * sent with the cookie of a session that switching accounts replaced). Resolves true while the person is
   * still signed in, or when the check could not tell (the call may be made once more), false once signed out.
   */
  expired: () => Promise<boolean>;
  /** Called after this page ended the session itself (signed out everywhere, deleted the account): signs out at once. */
  signedOut: () => void;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<SessionContextValue | null>(null);

export function useSession(): SessionContextValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error('useSession outside a signed-in page');
  return value;
}
