import type { Db, Sql } from './sql.js';

/** How a connect request ended, or `pending` while it waits for a person. */
export type ConnectRequestStatus = 'pending' | 'connected' | 'declined' | 'cancelled' | 'expired';

/** An agent's request that a person connect an API (table connect_requests, migration 00027). */
export interface ConnectRequestRow {
  id: string;
  account_id: string;
  api_id: string;
  requested_by_key_id: string | null;
  purpose: string;
  scopes: string[];
  status: ConnectRequestStatus;
  oauth_connection_id: string | null;
  resolved_by_person_id: string | null;
  created_at: Date;
  expires_at: Date;
  resolved_at: Date | null;
}

/** What a request needs to know about its API: its name, how it authenticates and its OAuth description. */
export interface ConnectRequestApiRow {
  id: string;
  name: string;
  auth_scheme: unknown;
  oauth: unknown;
  oauth_provider: string | null;
}

const COLUMNS = `id, account_id, api_id, requested_by_key_id, purpose, scopes, status, oauth_connection_id,
  resolved_by_person_id, created_at, expires_at, resolved_at`;

export async function getConnectRequestApi(db: Db, apiId: string): Promise<ConnectRequestApiRow | null> {
  const [row] = await db<ConnectRequestApiRow[]>`select id, name, auth_scheme, oauth, oauth_provider from apis where id = ${apiId}`;
  return row ?? null;
}

export async function getConnectRequestApis(db: Db, apiIds: string[]): Promise<ConnectRequestApiRow[]> {
  if (apiIds.length === 0) return [];
  return db<ConnectRequestApiRow[]>`select id, name, auth_scheme, oauth, oauth_provider from apis where id = any(${apiIds})`;
}

/**
 * Marks the account's pending requests whose expiry has passed as `expired` (expiry is applied
 * lazily, by the reads and writes of the account's requests) and returns them, so their ending can
 * be announced once: the update that moves a row is the only one that returns it.
 */
export async function expireDueConnectRequests(db: Db, accountId: string): Promise<ConnectRequestRow[]> {
  return db<ConnectRequestRow[]>`
    update connect_requests set status = 'expired', resolved_at = expires_at
     where account_id = ${accountId} and status = 'pending' and expires_at <= now()
    returning ${db.unsafe(COLUMNS)}`;
}

/**
 * Creates a request, or returns the pending one that is identical (same API, same requesting key,
 * same purpose and scopes): the account's requests for the API are serialised by a transaction-scoped
 * advisory lock, so two identical calls at once make one request. Null with `pending` when the
 * account already has `maxPending` pending requests.
 */
export async function createConnectRequest(
  sql: Sql,
  input: { accountId: string; apiId: string; keyId: string | null; purpose: string; scopes: string[]; expiresAt: Date; maxPending: number },
): Promise<{ request: ConnectRequestRow; created: boolean } | { request: null; pending: number }> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`connect-request:${input.accountId}`}, 0))`;
    const [twin] = await tx<ConnectRequestRow[]>`
      select ${tx.unsafe(COLUMNS)} from connect_requests
       where account_id = ${input.accountId} and api_id = ${input.apiId} and status = 'pending' and expires_at > now()
         and requested_by_key_id is not distinct from ${input.keyId} and purpose = ${input.purpose}
         and scopes = ${input.scopes}::text[]
       order by created_at limit 1`;
    if (twin) return { request: twin, created: false };
    const [{ pending } = { pending: 0 }] = await tx<{ pending: number }[]>`
      select count(*)::int as pending from connect_requests
       where account_id = ${input.accountId} and status = 'pending' and expires_at > now()`;
    if (pending >= input.maxPending) return { request: null, pending };
    const [row] = await tx<ConnectRequestRow[]>`
      insert into connect_requests (account_id, api_id, requested_by_key_id, purpose, scopes, expires_at)
      values (${input.accountId}, ${input.apiId}, ${input.keyId}, ${input.purpose}, ${input.scopes}::text[], ${input.expiresAt})
      returning ${tx.unsafe(COLUMNS)}`;
    if (!row) throw new Error('insert returned no row');
    return { request: row, created: true };
  });
}

/** One of the account's requests (any status), or null; `keyId` limits it to the requests that key made. */
export async function findConnectRequest(db: Db, accountId: string, id: string, keyId?: string | null): Promise<ConnectRequestRow | null> {
  const [row] = await db<ConnectRequestRow[]>`
    select ${db.unsafe(COLUMNS)} from connect_requests
     where id = ${id} and account_id = ${accountId}
       ${keyId === undefined ? db`` : db`and requested_by_key_id is not distinct from ${keyId}`}`;
  return row ?? null;
}

/** Several requests by id (any account): for waiters told that these rows changed. */
export async function findConnectRequestsByIds(db: Db, ids: string[]): Promise<ConnectRequestRow[]> {
  if (ids.length === 0) return [];
  return db<ConnectRequestRow[]>`select ${db.unsafe(COLUMNS)} from connect_requests where id = any(${ids}::uuid[])`;
}

const rank = (db: Db) => db`(case when status = 'pending' then 0 else 1 end)`;

/**
 * The account's requests, pending ones first, then newest first; `keyId` limits them to one key's.
 * The cursor is the id of the last row of the previous page.
 */
export async function listConnectRequests(
  db: Db,
  accountId: string,
  options: { keyId?: string | null; status?: ConnectRequestStatus; limit: number; cursor: string | null },
): Promise<{ rows: ConnectRequestRow[]; more: boolean } | null> {
  let anchor: { rank: number; created_at: Date; id: string } | undefined;
  if (options.cursor !== null) {
    [anchor] = await db<{ rank: number; created_at: Date; id: string }[]>`
      select ${rank(db)} as rank, created_at, id from connect_requests
       where account_id = ${accountId} and id::text = ${options.cursor}`;
    if (!anchor) return null;
  }
  const rows = await db<ConnectRequestRow[]>`
    select ${db.unsafe(COLUMNS)} from connect_requests
     where account_id = ${accountId}
       ${options.keyId === undefined ? db`` : db`and requested_by_key_id is not distinct from ${options.keyId}`}
       ${options.status === undefined ? db`` : db`and status = ${options.status}`}
       ${
         anchor
           ? db`and (${rank(db)} > ${anchor.rank} or (${rank(db)} = ${anchor.rank}
                 and (created_at < ${anchor.created_at} or (created_at = ${anchor.created_at} and id < ${anchor.id}))))`
           : db``
       }
     order by ${rank(db)}, created_at desc, id desc
     limit ${options.limit + 1}`;
  return { rows: rows.slice(0, options.limit), more: rows.length > options.limit };
}

/** Ends a pending request as declined (by a person) or cancelled (by the agent); null when it is not pending. */
export async function endConnectRequest(
  db: Db,
  input: { accountId: string; id: string; status: 'declined' | 'cancelled'; personId: string | null },
): Promise<ConnectRequestRow | null> {
  const [row] = await db<ConnectRequestRow[]>`
    update connect_requests set status = ${input.status}, resolved_by_person_id = ${input.personId}, resolved_at = now()
     where id = ${input.id} and account_id = ${input.accountId} and status = 'pending' and expires_at > now()
    returning ${db.unsafe(COLUMNS)}`;
  return row ?? null;
}

/**
 * Marks the account's pending requests for these APIs `connected`, answered by an OAuth connection
 * (or by a stored key: `oauthConnectionId` null). With `grantedScopes`, only requests whose scopes
 * the grant covers. Returns the rows it moved.
 */
export async function connectPendingRequests(
  db: Db,
  input: {
    accountId: string;
    apiIds: string[] | null;
    oauthProvider: string | null;
    oauthConnectionId: string | null;
    personId: string | null;
    grantedScopes: string[] | null;
  },
): Promise<ConnectRequestRow[]> {
  return db<ConnectRequestRow[]>`
    update connect_requests set status = 'connected', oauth_connection_id = ${input.oauthConnectionId},
           resolved_by_person_id = ${input.personId}, resolved_at = now()
     where account_id = ${input.accountId} and status = 'pending' and expires_at > now()
       ${input.apiIds === null ? db`` : db`and api_id = any(${input.apiIds}::text[])`}
       ${input.oauthProvider === null ? db`` : db`and api_id in (select id from apis where oauth_provider = ${input.oauthProvider})`}
       ${input.grantedScopes === null ? db`` : db`and scopes <@ ${input.grantedScopes}::text[]`}
    returning ${db.unsafe(COLUMNS)}`;
}

/** What the e-mail about a request says and to whom: the account's owner, the API's name, the purpose. */
export interface ConnectRequestEmailRow {
  status: ConnectRequestStatus;
  owner_email: string;
  api_id: string;
  api_name: string;
  auth_scheme: unknown;
  purpose: string;
  scopes: string[];
  expires_at: Date;
}

export async function findConnectRequestEmail(db: Db, id: string): Promise<ConnectRequestEmailRow | null> {
  const [row] = await db<ConnectRequestEmailRow[]>`
    select r.status, coalesce(p.email, a.email) as owner_email, r.api_id, api.name as api_name, api.auth_scheme,
           r.purpose, r.scopes, r.expires_at
      from connect_requests r
      join accounts a on a.id = r.account_id
      join apis api on api.id = r.api_id
      left join people p on p.id = a.owner_person_id
     where r.id = ${id}`;
  return row ?? null;
}
