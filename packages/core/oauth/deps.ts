import type { OAuthConnectionRow } from '#db/oauth';
import type { Sql } from '#db/sql';
import type { OAuthClients, OAuthSettings } from './client.js';

/**
 * A change of a connection's standing the account is told of: it came to need a person again (a
 * renewal the provider refused), or it works again after needing one (reconnected).
 */
export interface ConnectionTransition {
  type: 'connection.refresh_failed' | 'connection.recovered';
  /** The connection as it stands after the change (committed). */
  connection: OAuthConnectionRow;
}

/** What the OAuth domain functions need, built once per process (the edge's oauth plugin, a worker). */
export interface OAuthDeps {
  sql: Sql;
  clients: OAuthClients;
  settings: OAuthSettings & { PUBLIC_URL: string };
  /**
   * Tells every edge that an account's connections to a provider changed (so their proxies drop
   * what they cached). Called after the row changed; must not throw.
   */
  announce(accountId: string, provider: string): Promise<void>;
  /**
   * Tells the account of a change of a connection's standing (webhooks and e-mail: see
   * connectionNotifier). Called once per change, after it is committed; must not throw. Absent: no one is told.
   */
  transition?(change: ConnectionTransition): Promise<void>;
  log: { warn(object: Record<string, unknown>, message: string): void };
}

/** The platform's one redirect URI, registered with every provider: PUBLIC_URL + this path. */
export const OAUTH_CALLBACK_PATH = '/api/v1/oauth/callback';

export const oauthRedirectUri = (publicUrl: string) => `${publicUrl.replace(/\/+$/, '')}${OAUTH_CALLBACK_PATH}`;
