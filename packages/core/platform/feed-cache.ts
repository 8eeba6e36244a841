import { ChangeFeed, type ChangeFeedHeartbeat } from './change-feed.js';

export interface FeedCacheOptions<V> {
  redisUrl: string;
  /** The ChangeFeed channel on which any instance announces a changed entry by its key, or its `announcedAs` id ('*': all). */
  channel: string;
  /** How long an entry is trusted; bounds how long a change nobody announced takes to show. 0: no cache. */
  ttlMs: number;
  /** Past this many entries the cache starts over (a bound on memory, not an eviction policy). */
  maxEntries: number;
  /** Whether a value read is kept (default: every value, "none" included). */
  keep?: (value: V) => boolean;
  /**
   * The id a kept value's changes are announced by, when the cache key is another (API keys are
   * looked up by hash and announced by id). Default: the cache key itself.
   */
  announcedAs?: (value: V) => string;
  /** Told of every change announced on the channel, after its entry was evicted (the feed runs even with ttlMs 0). */
  onChange?: (id: string) => void;
  /** Heartbeats on the channel, so a silent subscription stops the cache being trusted (see ChangeFeed). */
  heartbeat?: ChangeFeedHeartbeat;
}

/**
 * A read-through, in-process cache of rows that any instance may change, kept honest by a ChangeFeed:
 * an announced key is evicted on every instance at once, and while the feed is not live the cache is
 * bypassed. A value read while a change was announced (the feed's generation moved), or begun while
 * the feed was not live, is served but not stored, so a stale read never outlives the change it
 * raced with.
 *
 * Subclasses give `read` the loader of their rows (ApiCache, ConnectionCache, the key verifier's KeyRows).
 */
export class FeedCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  /** Announced id -> cache key, for values whose `announcedAs` differs from their key. */
  private readonly aliases = new Map<string, string>();
  private feed: ChangeFeed | null = null;

  constructor(private readonly feedOptions: FeedCacheOptions<V>) {}

  start(): void {
    const { ttlMs, onChange } = this.feedOptions;
    if (ttlMs <= 0 && !onChange) return;
    this.feed = new ChangeFeed(
      this.feedOptions.redisUrl,
      this.feedOptions.channel,
      {
        changed: (id) => {
          this.forget(id);
          onChange?.(id);
        },
        lost: () => this.clear(),
      },
      this.feedOptions.heartbeat,
    );
    this.feed.start();
  }

  stop(): void {
    this.feed?.stop();
    this.clear();
  }

  /** True while changes are being received, i.e. while cached entries are used. */
  get live(): boolean {
    return this.feed?.live ?? false;
  }

  protected async read(key: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const feed = this.feed;
    if (feed?.live) {
      const hit = this.entries.get(key);
      if (hit && hit.expiresAt > now) return hit.value;
    }
    // A value is stored only if the feed was live for the whole read: one read before the
    // subscription came up (or while the feed was silent) may predate a change whose announcement
    // this instance never heard, and a generation that did not move cannot tell.
    const liveBefore = feed?.live ?? false;
    const generation = feed?.generation;
    const value = await load();
    const { ttlMs, maxEntries, keep, announcedAs } = this.feedOptions;
    if (liveBefore && feed?.live && ttlMs > 0 && generation === feed.generation && (keep?.(value) ?? true)) {
      if (this.entries.size >= maxEntries) this.clear();
      this.entries.set(key, { value, expiresAt: now + ttlMs });
      const id = announcedAs?.(value);
      if (id !== undefined && id !== key) this.aliases.set(id, key);
    }
    return value;
  }

  /**
   * For a change made by this instance, before it is announced: evicts the entry here at once and
   * keeps a read already in flight from storing the old value.
   */
  protected changedHere(key: string): void {
    this.feed?.invalidate();
    this.forget(key);
  }

  /** Evicts what an announcement of `id` names: the entry cached under it, or under the key it aliases. */
  private forget(id: string): void {
    if (id === '*') return this.clear();
    this.entries.delete(id);
    const key = this.aliases.get(id);
    if (key !== undefined) {
      this.entries.delete(key);
      this.aliases.delete(id);
    }
  }

  private clear(): void {
    this.entries.clear();
    this.aliases.clear();
  }
}
