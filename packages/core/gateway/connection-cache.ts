import type { Redis } from 'ioredis';
import { connectionChangeMessage, connectionChangesChannel, findSealedConnectionKey, publishConnectionChange } from '#db/connections';
import type { Sql } from '#db/sql';
import { FeedCache } from '#core/platform';

/** Where a metered call finds the caller's own sealed key for an API (null: none connected). */
export interface SealedConnectionKeys {
  sealedKey(accountId: string, apiId: string): Promise<Buffer | null>;
}

const MAX_ENTRIES = 50_000;

/**
 * The proxy's lookups of bring-your-own-key connections, cached in process: every metered call to an
 * API that takes a key asks whether the caller connected their own, and most have not, so without
 * this each such call would cost a Postgres round trip. "None connected" is cached as well as a key.
 *
 * Entries hold the sealed key (opened per call, a few microseconds), never the key itself. Connecting
 * or disconnecting through any edge evicts the entry on every edge at once (Redis pub/sub; FeedCache
 * bypasses the cache while the subscription is not live); the edge that made the change evicts its
 * own before it answers, so the caller's next call there uses the new key. Entries expire after
 * `ttlMs`, which bounds how long a change made another way (SQL by hand) takes to show.
 */
export class ConnectionCache extends FeedCache<Buffer | null> implements SealedConnectionKeys {
  private readonly redisPrefix: string;

  constructor(
    private readonly sql: Sql,
    options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {
    super({ redisUrl: options.redisUrl, channel: connectionChangesChannel(options.redisPrefix), ttlMs: options.ttlMs, maxEntries: MAX_ENTRIES });
    this.redisPrefix = options.redisPrefix;
  }

  sealedKey(accountId: string, apiId: string): Promise<Buffer | null> {
    return this.read(connectionChangeMessage(accountId, apiId), () => findSealedConnectionKey(this.sql, accountId, apiId));
  }

  /** Call after a connection row changed: evicts it here at once, then announces it to every other edge. */
  async changed(redis: Redis, accountId: string, apiId: string): Promise<void> {
    this.changedHere(connectionChangeMessage(accountId, apiId));
    await publishConnectionChange(redis, this.redisPrefix, accountId, apiId);
  }
}
