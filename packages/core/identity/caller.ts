import type { KeyRow } from '#db/keys';

/**
 * Who is calling, as every domain function sees it: an account, through an API key, an agent key or
 * the dashboard cookie. Agent keys carry their own limits (spend limit, allow-list of API ids).
 */
export interface Caller {
  accountId: string;
  via: 'key' | 'cookie';
  /**
   * 'owner' for the account's keys and its owner's dashboard session; 'approver' for a member the
   * account invited, who may see and complete human steps and nothing else.
   */
  role: 'owner' | 'approver';
  /** The approver's member id (role 'approver' only). */
  memberId: string | null;
  /** The person signed in to the dashboard (cookie only; null for keys and for sessions older than people). */
  personId: string | null;
  keyId: string | null;
  keyKind: 'api' | 'agent' | null;
  /** Agent keys only: true when a spend limit applies to charges. */
  spendLimited: boolean;
  /** Agent keys only: API ids the key may use, or null for any. */
  allowedApis: string[] | null;
}

export function callerFromKey(key: KeyRow): Caller {
  return {
    accountId: key.account_id,
    via: 'key',
    role: 'owner',
    memberId: null,
    personId: null,
    keyId: key.id,
    keyKind: key.kind,
    spendLimited: key.kind === 'agent' && key.spend_limit_micros !== null,
    allowedApis: key.kind === 'agent' ? key.allowed_apis : null,
  };
}

export function callerFromSession(accountId: string, memberId: string | null = null, personId: string | null = null): Caller {
  return {
    accountId,
    via: 'cookie',
    role: memberId === null ? 'owner' : 'approver',
    memberId,
    personId,
    keyId: null,
    keyKind: null,
    spendLimited: false,
    allowedApis: null,
  };
}
