import { z } from 'zod';
import { authSchemeSchema } from '#contracts/auth-scheme';
import {
  connectPendingRequests,
  createConnectRequest as insertConnectRequest,
  endConnectRequest,
  expireDueConnectRequests,
  findConnectRequest,
  getConnectRequestApi,
  getConnectRequestApis,
  listConnectRequests as selectConnectRequests,
  type ConnectRequestApiRow,
  type ConnectRequestRow,
  type ConnectRequestStatus,
} from '#db/connect-requests';
import type { Db, Sql } from '#db/sql';
import type { Caller } from '#core/identity';
import { notFound, PlatformError } from '#core/platform';

export type { ConnectRequestRow, ConnectRequestStatus };

/** How long a person has to answer a request before it expires. */
export const CONNECT_REQUEST_TTL_MS = 7 * 24 * 3600 * 1000;
/** Pending requests an account may have at once: each one mails its owner, so an agent cannot flood them. */
export const MAX_PENDING_CONNECT_REQUESTS = 50;
export const CONNECT_REQUEST_STATUSES = ['pending', 'connected', 'declined', 'cancelled', 'expired'] as const;

// Control characters other than tab and newline: a purpose is plain text a person reads.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** What the agent wants to do and why: plain text, shown to the person as written. */
export const purposeSchema = z
  .string()
  .trim()
  .min(10, 'must say in at least 10 characters what you want to do with the API and why')
  .max(1000, 'must be at most 1000 characters')
  .refine((text) => !CONTROL.test(text), 'must be plain text: no control or bidirectional-override characters')
  .describe('What you want to do with the API and why, in plain words for the person who connects it (10 to 1000 characters)');

/** OAuth scopes the agent needs, each as the API's description names it. */
export const scopesSchema = z
  .array(
    z
      .string()
      .min(1)
      .max(300)
      .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'must be a scope name: printable ASCII without spaces, quotes or backslashes'),
  )
  .max(50)
  .describe("OAuth scopes you need, from the API's declared scopes; only for OAuth APIs");

/** How a person connects the API: their own key (or token), an OAuth grant, or nothing is needed. */
export type AuthKind = 'key' | 'oauth' | 'none';

function authKindOf(api: ConnectRequestApiRow): AuthKind {
  const scheme = authSchemeSchema.safeParse(api.auth_scheme);
  if (!scheme.success || scheme.data.type === 'none') return 'none';
  return scheme.data.type === 'oauth2' ? 'oauth' : 'key';
}

/** The scopes an API's OAuth description declares (name to description), or null when it declares none. */
function declaredScopes(api: ConnectRequestApiRow): Record<string, string> | null {
  const oauth = api.oauth as { scopes?: unknown } | null;
  const scopes = oauth?.scopes;
  if (!scopes || typeof scopes !== 'object' || Array.isArray(scopes) || Object.keys(scopes).length === 0) return null;
  return scopes as Record<string, string>;
}

/** A request as every surface shows it (REST, MCP, webhooks, the dashboard): never a secret. */
export interface ConnectRequestView {
  id: string;
  apiId: string;
  apiName: string;
  authKind: AuthKind;
  /** The OAuth provider whose grant answers the request (OAuth APIs), else null. */
  oauthProvider: string | null;
  status: ConnectRequestStatus;
  purpose: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string;
  resolvedAt: string | null;
  /** The dashboard page where a person answers it: one step, after signing in. */
  connectUrl: string;
  /** What the agent does next, in words it acts on. */
  next: string;
}

/** The dashboard's inbox, opened at one request (the dashboard routes by path: /inbox?request=<id>). */
export const connectUrlFor = (publicUrl: string, id: string) => `${new URL(publicUrl).origin}/inbox?request=${encodeURIComponent(id)}`;

function nextStep(row: ConnectRequestRow, api: { id: string; name: string } | null): string {
  const name = api?.name ?? row.api_id;
  switch (row.status) {
    case 'pending':
      return (
        `A person has been asked to connect ${name} (in the dashboard's inbox, by e-mail and by webhook). ` +
        `Do not call ${row.api_id} until this request's status is "connected". Wait for the outcome: ` +
        `GET /api/v1/connect/requests/${row.id}?wait=60 (MCP: get_connection_request with waitSeconds) until the status changes, ` +
        `or follow GET /api/v1/connect/requests/${row.id}/events. Tell your user a person must connect ${name}. ` +
        `The request expires at ${row.expires_at.toISOString()}.`
      );
    case 'connected':
      return `Connected: a person connected ${name}. Call it now through the proxy (/api/v1/proxy/${row.api_id}/... or the call_api tool).`;
    case 'declined':
      return `A person declined to connect ${name}. Do not ask again for the same purpose; tell your user, or find another API for the task (discover_apis).`;
    case 'cancelled':
      return `This request was cancelled, so nobody is asked any more. Make a new request if you still need ${name}.`;
    case 'expired':
      return `Nobody connected ${name} before the request expired. Make a new request only if the task still needs it, and tell your user.`;
  }
}

export function presentConnectRequest(row: ConnectRequestRow, api: ConnectRequestApiRow | null, publicUrl: string): ConnectRequestView {
  return {
    id: row.id,
    apiId: row.api_id,
    apiName: api?.name ?? row.api_id,
    authKind: api ? authKindOf(api) : 'key',
    oauthProvider: api?.oauth_provider ?? null,
    status: row.status,
    purpose: row.purpose,
    scopes: row.scopes,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    resolvedAt: row.resolved_at?.toISOString() ?? null,
    connectUrl: connectUrlFor(publicUrl, row.id),
    next: nextStep(row, api),
  };
}

/** Presents rows with one read of their APIs. */
export async function presentConnectRequests(db: Db, rows: ConnectRequestRow[], publicUrl: string): Promise<ConnectRequestView[]> {
  const apis = new Map((await getConnectRequestApis(db, [...new Set(rows.map((row) => row.api_id))])).map((api) => [api.id, api]));
  return rows.map((row) => presentConnectRequest(row, apis.get(row.api_id) ?? null, publicUrl));
}

/**
 * Told of a request's life, after the change is committed: a new request (the account's webhook and
 * the owner's e-mail) and requests that ended (every edge's waiters, and the webhook). Best effort:
 * the change stands when telling fails; waiters also re-read on a timer.
 */
export interface ConnectRequestNotices {
  requested(view: ConnectRequestView, accountId: string): Promise<void>;
  ended(rows: ConnectRequestRow[]): Promise<void>;
}

export interface ConnectRequestDeps {
  sql: Sql;
  notices: ConnectRequestNotices;
  publicUrl: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const requestNotFound = (id: string) =>
  notFound(`Connect request ${id}`, 'GET /api/v1/connect/requests lists the requests you can see (an agent key sees the ones it made).');

/** Agent keys see the requests they made; the account's API keys and its owner in the dashboard see all. */
const visibleTo = (caller: Caller) => (caller.keyKind === 'agent' ? caller.keyId : undefined);

/** Expires the account's overdue requests (lazily, on each read or write of its requests) and tells of it. */
async function expireDue(deps: ConnectRequestDeps, accountId: string): Promise<void> {
  const expired = await expireDueConnectRequests(deps.sql, accountId);
  if (expired.length > 0) await deps.notices.ended(expired);
}

/**
 * An agent (or the account itself) asks a person to connect an API. An identical pending request
 * (same API, key, purpose and scopes) is answered instead of a new one (`created: false`).
 */
export async function requestConnection(
  deps: ConnectRequestDeps,
  caller: Caller,
  input: { apiId: string; purpose: string; scopes?: string[] | undefined },
): Promise<{ request: ConnectRequestView; created: boolean }> {
  const api = await getConnectRequestApi(deps.sql, input.apiId);
  if (!api) throw notFound(`API ${input.apiId}`, 'Find the API id with GET /api/v1/discover?q=<task> or GET /api/v1/apis.');
  if (caller.allowedApis !== null && !caller.allowedApis.includes(api.id)) {
    throw new PlatformError('api_not_allowed', `This agent key may not use ${api.id}`, {
      hint: `Its allow-list names: ${caller.allowedApis.join(', ') || 'no APIs'}. Ask the account's owner to allow it first.`,
    });
  }
  const kind = authKindOf(api);
  if (kind === 'none') {
    throw new PlatformError('conflict', `${api.name} needs no connection: it takes no credentials`, {
      hint: `Call it through the proxy (/api/v1/proxy/${api.id}/...) without asking anyone.`,
      tool: { hint: `Call it with call_api (apiId: "${api.id}") without asking anyone.` },
    });
  }
  const scopes = [...new Set(input.scopes ?? [])].sort();
  if (scopes.length > 0) {
    if (kind !== 'oauth') {
      throw new PlatformError('validation_failed', `scopes: ${api.name} does not use OAuth, so it has no scopes`, {
        hint: 'Leave scopes out: a person connects this API with their own key.',
      });
    }
    const declared = declaredScopes(api);
    const unknown = declared ? scopes.filter((scope) => !(scope in declared)) : [];
    if (unknown.length > 0) {
      const names = Object.keys(declared!);
      throw new PlatformError('validation_failed', `scopes: ${api.name} declares no scope ${unknown.slice(0, 5).join(', ')}`, {
        hint: `Use scopes the API declares, for example: ${names.slice(0, 8).join(', ')}${names.length > 8 ? ` (${names.length} in all; GET /api/v1/apis/${api.id} lists them)` : ''}.`,
      });
    }
  }
  await expireDue(deps, caller.accountId);
  const made = await insertConnectRequest(deps.sql, {
    accountId: caller.accountId,
    apiId: api.id,
    keyId: caller.keyId,
    purpose: input.purpose,
    scopes,
    expiresAt: new Date(Date.now() + CONNECT_REQUEST_TTL_MS),
    maxPending: MAX_PENDING_CONNECT_REQUESTS,
  });
  if (made.request === null) {
    throw new PlatformError('conflict', `This account already has ${made.pending} connect requests waiting for a person`, {
      hint: 'Cancel the requests you no longer need (DELETE /api/v1/connect/requests/{id}) or wait for a person to answer them.',
    });
  }
  const view = presentConnectRequest(made.request, api, deps.publicUrl);
  if (made.created) await deps.notices.requested(view, caller.accountId);
  return { request: view, created: made.created };
}

/** One request the caller may see (404 otherwise, including another account's). */
export async function getConnectRequest(deps: ConnectRequestDeps, caller: Caller, id: string): Promise<ConnectRequestView> {
  if (!UUID.test(id)) throw requestNotFound(id);
  await expireDue(deps, caller.accountId);
  const row = await findConnectRequest(deps.sql, caller.accountId, id, visibleTo(caller));
  if (!row) throw requestNotFound(id);
  return presentConnectRequest(row, await getConnectRequestApi(deps.sql, row.api_id), deps.publicUrl);
}

/** The requests the caller may see, pending first, then newest first. */
export async function listConnectRequests(
  deps: ConnectRequestDeps,
  caller: Caller,
  options: { status?: ConnectRequestStatus | undefined; limit: number; cursor?: string | undefined },
): Promise<{ requests: ConnectRequestView[]; nextCursor: string | null }> {
  await expireDue(deps, caller.accountId);
  const page = await selectConnectRequests(deps.sql, caller.accountId, {
    keyId: visibleTo(caller),
    ...(options.status ? { status: options.status } : {}),
    limit: options.limit,
    cursor: options.cursor ?? null,
  });
  if (!page) throw new PlatformError('validation_failed', 'Unknown cursor', { hint: 'Pass the nextCursor of the previous page unchanged.' });
  return {
    requests: await presentConnectRequests(deps.sql, page.rows, deps.publicUrl),
    nextCursor: page.more ? (page.rows.at(-1)?.id ?? null) : null,
  };
}

/** Ends a pending request: declined by a person in the dashboard, or cancelled by whoever can see it. */
async function endRequest(deps: ConnectRequestDeps, caller: Caller, id: string, status: 'declined' | 'cancelled'): Promise<ConnectRequestView> {
  const current = await getConnectRequest(deps, caller, id);
  if (current.status !== 'pending') {
    throw new PlatformError('conflict', `This connect request is already ${current.status}`, {
      hint: 'Only a pending request can be declined or cancelled; GET it to see how it ended.',
    });
  }
  const row = await endConnectRequest(deps.sql, { accountId: caller.accountId, id, status, personId: caller.personId });
  if (!row) return endRequest(deps, caller, id, status);
  await deps.notices.ended([row]);
  return presentConnectRequest(row, await getConnectRequestApi(deps.sql, row.api_id), deps.publicUrl);
}

/** A person declines: only from the dashboard (a person signed in), never with a key. */
export async function declineConnectRequest(deps: ConnectRequestDeps, caller: Caller, id: string): Promise<ConnectRequestView> {
  if (caller.via !== 'cookie') {
    throw new PlatformError('forbidden', 'Only a person in the dashboard can decline a connect request', {
      hint: 'An agent that no longer needs the connection cancels its request: DELETE /api/v1/connect/requests/{id}.',
    });
  }
  return endRequest(deps, caller, id, 'declined');
}

/** The agent (or the account) withdraws a request it no longer needs. */
export async function cancelConnectRequest(deps: ConnectRequestDeps, caller: Caller, id: string): Promise<ConnectRequestView> {
  return endRequest(deps, caller, id, 'cancelled');
}

/**
 * Marks the account's pending connect requests `connected` once a connection answers them: a stored
 * key for one API (`apiId`), or an OAuth grant for a provider (`oauthProvider`: every API that
 * provider issues tokens for; with `grantedScopes`, only the requests whose scopes the grant covers).
 * Call it after the connection is committed (inside the connection's transaction, waiters learn of
 * it at their next re-read instead of at once). `notices` tells waiters on every edge and the
 * account's webhooks; returns the requests it moved.
 */
export async function resolveConnectRequests(
  db: Db,
  input: {
    accountId: string;
    apiId?: string | undefined;
    oauthProvider?: string | undefined;
    oauthConnectionId?: string | null | undefined;
    personId?: string | null | undefined;
    grantedScopes?: string[] | undefined;
  },
  notices: ConnectRequestNotices,
): Promise<ConnectRequestRow[]> {
  if (input.apiId === undefined && input.oauthProvider === undefined) throw new Error('resolveConnectRequests needs apiId or oauthProvider');
  const rows = await connectPendingRequests(db, {
    accountId: input.accountId,
    apiIds: input.apiId === undefined ? null : [input.apiId],
    oauthProvider: input.oauthProvider ?? null,
    oauthConnectionId: input.oauthConnectionId ?? null,
    personId: input.personId ?? null,
    grantedScopes: input.grantedScopes ?? null,
  });
  if (rows.length > 0) await notices.ended(rows);
  return rows;
}
