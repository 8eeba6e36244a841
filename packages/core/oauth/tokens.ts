import type { OAuthConnectionRow } from '#db/oauth';
import type { OAuthBearer, OAuthBearerSource } from '#core/gateway';
import { PlatformError } from '#core/platform';
import type { OAuthConnectionCache } from './connection-cache.js';
import type { OAuthDeps } from './deps.js';
import { isExpiring, renewConnection, type RenewOptions } from './renewal.js';
import { openAccessToken } from './secrets.js';

/** An access token younger than this is not renewed on an upstream's 401 (see renewRefused). */
export const MIN_TOKEN_AGE_FOR_401_MS = 30_000;

const bearerOf = (key: Buffer, row: OAuthConnectionRow): OAuthBearer => ({
  token: openAccessToken(key, row.id, row.accessTokenSealed),
  connectionId: row.id,
  renewedAt: row.refreshedAt ?? row.createdAt,
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The connection a call names: by id, else by label (exactly, then ignoring case when that is unambiguous). */
export function pickConnection(connections: OAuthConnectionRow[], selector: string | null): OAuthConnectionRow | undefined {
  if (selector === null) return connections.find((c) => c.isDefault) ?? connections[0];
  const wanted = selector.trim();
  if (UUID.test(wanted)) {
    const byId = connections.find((c) => c.id === wanted.toLowerCase());
    if (byId) return byId;
  }
  const exact = connections.find((c) => c.label === wanted);
  if (exact) return exact;
  const folded = connections.filter((c) => c.label.toLowerCase() === wanted.toLowerCase());
  return folded.length === 1 ? folded[0] : undefined;
}

/** The 409 of a connection that needs a person again, with the way back for each reader. */
export function needsReauth(row: Pick<OAuthConnectionRow, 'label' | 'provider' | 'statusReason'>, apiId: string): PlatformError {
  return new PlatformError('connection_needs_reauth', `Your connection "${row.label}" to ${row.provider} must be reconnected`, {
    hint:
      `${row.statusReason ?? 'The provider no longer accepts its tokens'}. Nothing was charged. ` +
      `A person reconnects it in the dashboard (Connections, "Reconnect"); an agent can ask one with POST /api/v1/connect/${apiId}/request.`,
  });
}

/**
 * The proxy's source of OAuth bearer tokens (core/gateway's OAuthBearerSource): the caller's
 * connection to the API's provider, picked by X-Service-Connection (label or id) or the default,
 * read from each edge's cache. An access token at or near its expiry is renewed in line before the
 * call (refresh token, or client credentials again), under a row lock so concurrent calls on any
 * edge renew it once; a provider that refuses the renewal marks the connection `needs_reauth`.
 */
export class OAuthTokenSource implements OAuthBearerSource {
  constructor(
    private readonly deps: OAuthDeps,
    private readonly cache: OAuthConnectionCache,
  ) {}

  async bearer(accountId: string, api: { id: string; provider: string }, selector: string | null): Promise<OAuthBearer | null> {
    const connections = await this.cache.connections(accountId, api.provider);
    if (connections.length === 0 && selector === null) return null;
    const chosen = pickConnection(connections, selector);
    if (!chosen) {
      const labels = connections.map((c) => `"${c.label}"`).join(', ');
      throw new PlatformError('connection_required', `You have no connection to ${api.provider} named "${selector}"`, {
        hint:
          `Nothing was charged. ${labels ? `Your connections to ${api.provider}: ${labels}; send one of them (or its id) in X-Service-Connection, or leave the header out to use the default.` : `You have no connection to ${api.provider} yet.`} ` +
          `A person connects one in the dashboard (Connections); an agent can ask one with POST /api/v1/connect/${api.id}/request.`,
        tool: {
          hint:
            `Nothing was charged. ${labels ? `Your connections to ${api.provider}: ${labels}; pass one of them (or its id) as headers["X-Service-Connection"] of call_api, or leave it out to use the default.` : `You have no connection to ${api.provider} yet.`} ` +
            `A person connects one in the dashboard (Connections); ask for it with request_connection (apiId: "${api.id}", purpose: what you want to do and why).`,
        },
      });
    }
    const key = this.deps.settings.CONNECTIONS_MASTER_KEY;
    if (chosen.status === 'needs_reauth') throw needsReauth(chosen, api.id);
    if (!isExpiring(chosen)) return bearerOf(key, chosen);
    const renewed = await this.renew(chosen.id);
    if (!renewed)
      throw new PlatformError('connection_required', `Your connection "${chosen.label}" to ${api.provider} was just removed`, {
        hint: 'Nothing was charged.',
      });
    if (renewed.status === 'needs_reauth') throw needsReauth(renewed, api.id);
    return bearerOf(key, renewed);
  }

  /**
   * An upstream refused `refused` (401): its connection is renewed whatever its expiry, unless it was
   * renewed since that token was issued (then the newer token is the answer), so concurrent 401s on
   * any edge renew it once. Null when there is nothing better to retry with: the connection needs a
   * person (a refusal now marks it, and tells the account), cannot be renewed without one, is gone,
   * the provider could not be reached, or the token is younger than MIN_TOKEN_AGE_FOR_401_MS (a
   * renewal would not help, and an upstream that answers 401 to everything cannot make the platform
   * renew without pause). Never throws: the caller then gets the upstream's 401.
   */
  async renewRefused(accountId: string, refused: OAuthBearer): Promise<OAuthBearer | null> {
    if (Date.now() - refused.renewedAt.getTime() < MIN_TOKEN_AGE_FOR_401_MS) return null;
    try {
      const outcome = await renewConnection(this.deps, refused.connectionId, { cause: 'upstream_401', forceUnlessRenewedSince: refused.renewedAt });
      if (outcome.kind !== 'renewed' && outcome.kind !== 'current') return null;
      const row = outcome.row;
      if (row.accountId !== accountId || row.status !== 'ready') return null;
      const bearer = bearerOf(this.deps.settings.CONNECTIONS_MASTER_KEY, row);
      return bearer.token === refused.token ? null : bearer;
    } catch (error) {
      this.deps.log.warn({ err: error, connectionId: refused.connectionId }, 'OAuth token renewal after a 401 failed');
      return null;
    }
  }

  /**
   * Renews a connection's access token now (renewConnection: single-flight under the row lock): null
   * when the connection is gone. Returns the row as it stands after: renewed, renewed meanwhile by
   * another call, not due, or marked `needs_reauth`. A provider that cannot be reached is the
   * caller's 503.
   */
  async renew(connectionId: string, options: RenewOptions = {}): Promise<OAuthConnectionRow | null> {
    const outcome = await renewConnection(this.deps, connectionId, { cause: 'call', ...options });
    if (outcome.kind === 'gone') return null;
    if (outcome.kind === 'unreachable') {
      throw new PlatformError('upstream_unavailable', `${outcome.row.provider} could not be reached to renew the access token`, {
        hint: 'Nothing was charged. Retry after the number of seconds in Retry-After.',
        headers: { 'Retry-After': '30' },
      });
    }
    return outcome.row;
  }
}
