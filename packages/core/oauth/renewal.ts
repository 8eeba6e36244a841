import * as oidc from 'openid-client';
import {
  getOAuthApp,
  lockOAuthConnection,
  markOAuthNeedsReauth,
  noteOAuthRenewalUnreachable,
  updateOAuthTokens,
  type OAuthConnectionRow,
} from '#db/oauth';
import { providerFailure, type ProviderFailure } from './client.js';
import { expiryOf, grantedScopes } from './connections.js';
import type { OAuthDeps } from './deps.js';
import { openRefreshToken, sealTokens } from './secrets.js';

/** An access token this close to its expiry is renewed before use, so it does not expire on its way upstream. */
export const EXPIRY_MARGIN_MS = 30_000;

/** The renewal job's first wait after a provider could not be reached; each failure in a row doubles it, up to RETRY_MAX_MS. */
export const RETRY_BASE_MS = 60_000;
export const RETRY_MAX_MS = 3_600_000;

export const isExpiring = (row: Pick<OAuthConnectionRow, 'expiresAt'>, now = Date.now(), withinMs = EXPIRY_MARGIN_MS) =>
  row.expiresAt !== null && row.expiresAt.getTime() - withinMs <= now;

/** What asked for a renewal: a call in line, the job ahead of expiry, or an upstream that refused the token (401). */
export type RenewalCause = 'call' | 'job' | 'upstream_401';

export interface RenewOptions {
  /** Renew when the access token expires within this many milliseconds (default EXPIRY_MARGIN_MS). */
  expiringWithinMs?: number;
  /** Renew a connection with a refresh token last renewed before this time, whatever its expiry (idle renewal). */
  renewedBefore?: Date;
  /**
   * Renew whatever the expiry, unless the connection was renewed after this time. An upstream refused
   * the token of the row renewed at this time (its refreshedAt): calls that saw the same token pass
   * the same time, so however many of them, on however many edges, the token is renewed once and the
   * others get the token it was replaced with.
   */
  forceUnlessRenewedSince?: Date;
  cause?: RenewalCause;
}

/** How a renewal ended. `current`: nothing was due (or another call renewed it meanwhile). */
export type RenewalOutcome =
  | { kind: 'renewed'; row: OAuthConnectionRow }
  | { kind: 'current'; row: OAuthConnectionRow }
  /** `marked`: this renewal is the one that found it must be reconnected (else it already was). */
  | { kind: 'needs_reauth'; row: OAuthConnectionRow; marked: boolean }
  /** The provider could not be reached (network, 5xx, 429): still ready; the job tries again after `row.refreshRetryAt`. */
  | { kind: 'unreachable'; row: OAuthConnectionRow; failure: ProviderFailure }
  | { kind: 'gone' };

/**
 * A failure a later attempt may not repeat: no answer, a 5xx or 429, or the two OAuth error codes that
 * say so (RFC 6749 §5.2 has none for token requests, but providers send `temporarily_unavailable` and
 * `server_error` there too). Anything else the provider answered is a refusal: a person must reconnect.
 */
export function isTransientFailure(failure: ProviderFailure): boolean {
  if (failure.kind === 'unreachable') return true;
  if (failure.status !== null && (failure.status >= 500 || failure.status === 429)) return true;
  return failure.error === 'temporarily_unavailable' || failure.error === 'server_error';
}

/** The job's wait before trying a connection again after `failures` unreachable renewals in a row: doubling, capped, jittered (50-100%). */
export function retryDelayMs(failures: number, random = Math.random): number {
  const ceiling = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, Math.min(failures - 1, 20)));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

function isDue(current: OAuthConnectionRow, options: RenewOptions, now: number): boolean {
  if (options.forceUnlessRenewedSince) {
    const renewedAt = current.refreshedAt ?? current.createdAt;
    if (renewedAt.getTime() <= options.forceUnlessRenewedSince.getTime()) return true;
  }
  if (isExpiring(current, now, options.expiringWithinMs ?? EXPIRY_MARGIN_MS)) return true;
  if (options.renewedBefore && current.refreshTokenSealed !== null) {
    return (current.refreshedAt ?? current.createdAt).getTime() < options.renewedBefore.getTime();
  }
  return false;
}

/**
 * Renews a connection's access token, the one code path for every renewal (in line before a call,
 * after an upstream's 401, and the renewal job): under the connection's row lock, so concurrent
 * renewals on any edge or worker ask the provider once and the rest find it renewed. With a refresh
 * token (rotated when the provider sends a new one) or, for client credentials, the grant again. A
 * provider that refuses marks the connection `needs_reauth`; one that cannot be reached leaves it
 * ready and backs the job off. Each change of standing is told once (OAuthDeps.transition), after
 * the change is committed, and every change is announced to the edges' caches.
 */
export async function renewConnection(deps: OAuthDeps, connectionId: string, options: RenewOptions = {}): Promise<RenewalOutcome> {
  const key = deps.settings.CONNECTIONS_MASTER_KEY;
  const outcome = await deps.sql.begin(async (tx): Promise<RenewalOutcome> => {
    const current = await lockOAuthConnection(tx, connectionId);
    if (!current) return { kind: 'gone' };
    if (current.status === 'needs_reauth') return { kind: 'needs_reauth', row: current, marked: false };
    // Renewed by another call while this one waited for the lock, or not due.
    if (!isDue(current, options, Date.now())) return { kind: 'current', row: current };
    const refuse = async (reason: string): Promise<RenewalOutcome> => {
      const row = await markOAuthNeedsReauth(tx, current.id, reason);
      return row ? { kind: 'needs_reauth', row, marked: true } : { kind: 'gone' };
    };
    if (current.grantType === 'authorization_code' && current.refreshTokenSealed === null) {
      // Nothing to renew with: only a person can, and only once the access has run out (a 401 of a token still in date may be the upstream's).
      if (!isExpiring(current, Date.now(), 0)) return { kind: 'current', row: current };
      return refuse('The access expired and the provider gave no refresh token');
    }
    const app = await getOAuthApp(tx, current.appId);
    if (!app) return refuse('The OAuth app it was made with is no longer registered');
    let tokens: oidc.TokenEndpointResponse;
    try {
      const configuration = deps.clients.configuration(app);
      tokens =
        current.grantType === 'client_credentials'
          ? await oidc.clientCredentialsGrant(configuration, current.scopes.length > 0 ? { scope: current.scopes.join(' ') } : {})
          : await oidc.refreshTokenGrant(configuration, openRefreshToken(key, current.id, current.refreshTokenSealed!));
    } catch (error) {
      const failure = providerFailure(error);
      const transient = isTransientFailure(failure);
      deps.log.warn(
        {
          provider: current.provider,
          connectionId: current.id,
          cause: options.cause ?? 'call',
          failure: transient ? 'unreachable' : 'refused',
          status: failure.status,
          oauthError: failure.error,
        },
        'OAuth token renewal failed',
      );
      if (!transient) return refuse(`The provider refused to renew the access${failure.error ? ` (${failure.error})` : ''}`);
      const row = await noteOAuthRenewalUnreachable(tx, current.id, new Date(Date.now() + retryDelayMs(current.refreshFailures + 1)));
      return row ? { kind: 'unreachable', row, failure } : { kind: 'gone' };
    }
    const sealed = sealTokens(key, current.id, { accessToken: tokens.access_token, refreshToken: tokens.refresh_token ?? null });
    const row = await updateOAuthTokens(tx, current.id, {
      accessTokenSealed: sealed.accessTokenSealed,
      // Rotated when the provider sent a new one; kept otherwise.
      ...(sealed.refreshTokenSealed ? { refreshTokenSealed: sealed.refreshTokenSealed } : {}),
      expiresAt: expiryOf(tokens),
      scopes: grantedScopes(tokens, current.scopes),
    });
    return row ? { kind: 'renewed', row } : { kind: 'gone' };
  });
  // The edges' caches hold the tokens and the status; a failure's retry time is the job's alone.
  if (outcome.kind === 'renewed' || (outcome.kind === 'needs_reauth' && outcome.marked))
    await deps.announce(outcome.row.accountId, outcome.row.provider);
  if (outcome.kind === 'needs_reauth' && outcome.marked) await deps.transition?.({ type: 'connection.refresh_failed', connection: outcome.row });
  return outcome;
}
