import type { Redis } from 'ioredis';
import { connectionChangeMessage, connectionChangesChannel, findSealedConnectionKey, publishConnectionChange } from '#db/connections';
import type { Sql } from '#db/sql';
import { ChangeFeed } from '#core/platform';

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
 * or disconnecting through any edge evicts the entry on every edge at once (Redis pub/sub, as the API
 * cache does); the edge that made the change evicts its own before it answers, so the caller's next
 * call there uses the new key. While the subscription is not live the cache is bypassed, and entries
 * expire after `ttlMs`, which bounds how long a change made another way (SQL by hand) takes to show.
 */
export class ConnectionCache implements SealedConnectionKeys {
  private readonly cache = new Map<string, { sealed: Buffer | null; expiresAt: number }>();
  private feed: ChangeFeed | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {}

  start(): void {
    if (this.options.ttlMs <= 0) return;
    this.feed = new ChangeFeed(this.options.redisUrl, connectionChangesChannel(this.options.redisPrefix), {
      changed: (message) => this.forget(message),
      lost: () => this.cache.clear(),
    });
    this.feed.start();
  }

  stop(): void {
    this.feed?.stop();
    this.cache.clear();
  }

  /** True while changes are being received, i.e. while cached entries are used. */
  get live(): boolean {
    return this.feed?.live ?? false;
  }

  async sealedKey(accountId: string, apiId: string): Promise<Buffer | null> {
    const now = Date.now();
    const feed = this.feed;
    const key = connectionChangeMessage(accountId, apiId);
    if (feed?.live) {
      const hit = this.cache.get(key);
      if (hit && hit.expiresAt > now) return hit.sealed;
    }
    const generation = feed?.generation;
    const sealed = await findSealedConnectionKey(this.sql, accountId, apiId);
    // Stored only if no change was announced (or made here) while the row was being read.
    if (feed?.live && generation === feed.generation) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.clear();
      this.cache.set(key, { sealed, expiresAt: now + this.options.ttlMs });
    }
    return sealed;
  }

  /**
   * Call after a connection row changed: evicts it here at once (and keeps a read already in flight
   * from storing the old row), then announces it to every other edge.
   */
  async changed(redis: Redis, accountId: string, apiId: string): Promise<void> {
    this.feed?.invalidate();
    this.forget(connectionChangeMessage(accountId, apiId));
    await publishConnectionChange(redis, this.options.redisPrefix, accountId, apiId);
  }

  private forget(message: string): void {
    if (message === '*') this.cache.clear();
    else this.cache.delete(message);
  }
}
