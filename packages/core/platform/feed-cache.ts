import { ChangeFeed } from './change-feed.js';

export interface FeedCacheOptions<V> {
  redisUrl: string;
  /** The ChangeFeed channel on which any instance announces a changed entry by its key ('*': all). */
  channel: string;
  /** How long an entry is trusted; bounds how long a change nobody announced takes to show. 0: no cache. */
  ttlMs: number;
  /** Past this many entries the cache starts over (a bound on memory, not an eviction policy). */
  maxEntries: number;
  /** Whether a value read is kept (default: every value, "none" included). */
  keep?: (value: V) => boolean;
}

/**
 * A read-through, in-process cache of rows that any instance may change, kept honest by a ChangeFeed:
 * an announced key is evicted on every instance at once, and while the feed is not live the cache is
 * bypassed. A value read while a change was announced (the feed's generation moved) is served but not
 * stored, so a stale read never outlives the change it raced with.
 *
 * Subclasses give `read` the loader of their rows (ApiCache, ConnectionCache). KeyVerifier keeps its
 * own map: keys are announced by id but looked up by hash, and it tells listeners of each change.
 */
export class FeedCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private feed: ChangeFeed | null = null;

  constructor(private readonly feedOptions: FeedCacheOptions<V>) {}

  start(): void {
    if (this.feedOptions.ttlMs <= 0) return;
    this.feed = new ChangeFeed(this.feedOptions.redisUrl, this.feedOptions.channel, {
      changed: (key) => this.forget(key),
      lost: () => this.entries.clear(),
    });
    this.feed.start();
  }

  stop(): void {
    this.feed?.stop();
    this.entries.clear();
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
    const generation = feed?.generation;
    const value = await load();
    if (feed?.live && generation === feed.generation && (this.feedOptions.keep?.(value) ?? true)) {
      if (this.entries.size >= this.feedOptions.maxEntries) this.entries.clear();
      this.entries.set(key, { value, expiresAt: now + this.feedOptions.ttlMs });
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

  private forget(key: string): void {
    if (key === '*') this.entries.clear();
    else this.entries.delete(key);
  }
}
