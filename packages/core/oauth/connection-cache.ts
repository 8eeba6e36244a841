import type { Redis } from 'ioredis';
import {
  listOAuthConnections,
  oauthConnectionChangeMessage,
  oauthConnectionChangesChannel,
  publishOAuthConnectionChange,
  type OAuthConnectionRow,
} from '#db/oauth';
import type { Sql } from '#db/sql';
import { FeedCache } from '#core/platform';

const MAX_ENTRIES = 50_000;

/**
 * Each edge's memory of an account's OAuth connections to a provider (sealed tokens, labels, the
 * default, status, expiry), so a proxied call to an OAuth API costs no Postgres query. "None" is
 * cached too. Any change (connect, refresh, disconnect, new default) evicts the entry on every edge
 * through Redis pub/sub, and at once on the edge that made it; entries expire after `ttlMs`
 * (CONNECTION_CACHE_TTL_MS), which bounds how long a change made by hand takes to show.
 */
export class OAuthConnectionCache extends FeedCache<OAuthConnectionRow[]> {
  private readonly redisPrefix: string;

  constructor(
    private readonly sql: Sql,
    options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {
    super({ redisUrl: options.redisUrl, channel: oauthConnectionChangesChannel(options.redisPrefix), ttlMs: options.ttlMs, maxEntries: MAX_ENTRIES });
    this.redisPrefix = options.redisPrefix;
  }

  connections(accountId: string, provider: string): Promise<OAuthConnectionRow[]> {
    return this.read(oauthConnectionChangeMessage(accountId, provider), () => listOAuthConnections(this.sql, accountId, provider));
  }

  /** Call after an account's connections to a provider changed: evicts them here at once, then tells every other edge. */
  async changed(redis: Redis, accountId: string, provider: string): Promise<void> {
    this.changedHere(oauthConnectionChangeMessage(accountId, provider));
    await publishOAuthConnectionChange(redis, this.redisPrefix, accountId, provider);
  }
}
