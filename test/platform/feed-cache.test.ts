import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, FeedCache, type FeedCacheOptions } from '#core/platform';
import { uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A FeedCache over an in-memory "table", counting the reads that reach it. */
class TableCache extends FeedCache<string | null> {
  reads = 0;
  /** Runs during a read, after the table was read and before the value is returned. */
  duringRead: (() => Promise<void>) | null = null;

  constructor(
    readonly table: Map<string, string>,
    options: Omit<FeedCacheOptions<string | null>, 'maxEntries'> & { maxEntries?: number },
  ) {
    super({ maxEntries: 1_000, ...options });
  }

  get(key: string): Promise<string | null> {
    return this.read(key, async () => {
      this.reads += 1;
      const value = this.table.get(key) ?? null;
      await this.duringRead?.();
      return value;
    });
  }

  changedHereForTest(key: string): void {
    this.changedHere(key);
  }
}

describe('FeedCache: an in-process cache evicted through Redis pub/sub', () => {
  const publisher = createRedis(redisUrl);
  const caches: TableCache[] = [];
  const make = (options: Partial<FeedCacheOptions<string | null>> & { channel: string }) => {
    const cache = new TableCache(
      new Map([
        ['a', 'A1'],
        ['b', 'B1'],
      ]),
      { redisUrl, ttlMs: 600_000, ...options },
    );
    cache.start();
    caches.push(cache);
    return cache;
  };
  /** Waits until an announcement on `channel` has been heard: a marker key is announced after it. */
  const announce = async (cache: TableCache, channel: string, key: string) => {
    await publisher.publish(channel, key);
    const marker = `marker-${uniqueId('m')}`;
    cache.table.set(marker, 'M');
    await cache.get(marker);
    const before = cache.reads;
    await publisher.publish(channel, marker);
    // Pub/sub keeps order per channel: once the marker is evicted, `key` was too.
    await until(`the cache hears ${marker}`, async () => {
      await cache.get(marker);
      return cache.reads > before;
    });
  };

  beforeAll(async () => {
    await publisher.ping();
  });
  afterAll(() => {
    for (const cache of caches) cache.stop();
    publisher.disconnect();
  });

  it('reads a key once while live, and again after another instance announces it changed', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel });
    await until('the feed is live', () => cache.live);
    expect(await cache.get('a')).toBe('A1');
    expect(await cache.get('a')).toBe('A1');
    expect(cache.reads).toBe(1);
    cache.table.set('a', 'A2');
    expect(await cache.get('a'), 'an unannounced change is not seen').toBe('A1');
    await announce(cache, channel, 'a');
    expect(await cache.get('a')).toBe('A2');
  });

  it('forgets everything on "*"', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel });
    await until('the feed is live', () => cache.live);
    await cache.get('a');
    await cache.get('b');
    cache.table.set('a', 'A2');
    cache.table.set('b', 'B2');
    await announce(cache, channel, '*');
    expect([await cache.get('a'), await cache.get('b')]).toEqual(['A2', 'B2']);
  });

  it('serves but does not store a value read while a change was announced', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel });
    await until('the feed is live', () => cache.live);
    // The row changes and is announced while the old value is being read.
    cache.duringRead = async () => {
      cache.duringRead = null;
      cache.table.set('a', 'A2');
      await announce(cache, channel, 'a');
    };
    expect(await cache.get('a'), 'the read in flight answers what it read').toBe('A1');
    expect(await cache.get('a'), 'but did not keep it').toBe('A2');
  });

  it('does not store a value whose read began before the feed was live (a change announced meanwhile was never heard)', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel });
    // Just started: the subscription is not up yet, so an announcement now would not be heard.
    expect(cache.live).toBe(false);
    cache.duringRead = async () => {
      cache.duringRead = null;
      await until('the feed is live', () => cache.live);
      // Changed (and announced, unheard) after the row was read, before the subscription came up.
      cache.table.set('a', 'A2');
    };
    expect(await cache.get('a'), 'the read answers what it read').toBe('A1');
    expect(await cache.get('a'), 'but did not keep it').toBe('A2');
  });

  it('keeps a read in flight from storing the old value when this instance made the change', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel });
    await until('the feed is live', () => cache.live);
    expect(await cache.get('a')).toBe('A1');
    cache.table.set('a', 'A2');
    cache.changedHereForTest('a');
    cache.duringRead = async () => {
      cache.duringRead = null;
      cache.table.set('a', 'A3');
      cache.changedHereForTest('a');
    };
    expect(await cache.get('a')).toBe('A2');
    expect(await cache.get('a')).toBe('A3');
  });

  it('does not store what `keep` refuses (an unknown row is looked up again)', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel, keep: (value) => value !== null });
    await until('the feed is live', () => cache.live);
    expect(await cache.get('nope')).toBeNull();
    cache.table.set('nope', 'N');
    expect(await cache.get('nope')).toBe('N');
    expect(await cache.get('nope')).toBe('N');
    expect(cache.reads).toBe(2);
  });

  it('starts over past maxEntries, and expires entries after ttlMs', async () => {
    const channel = uniqueId('feed-cache');
    const cache = make({ channel, maxEntries: 2, ttlMs: 200 });
    await until('the feed is live', () => cache.live);
    await cache.get('a');
    await cache.get('b');
    await cache.get('a');
    expect(cache.reads).toBe(2);
    cache.table.set('c', 'C1');
    await cache.get('c');
    await cache.get('a');
    expect(cache.reads, 'the third key cleared the two before it').toBe(4);
    await new Promise((resolve) => setTimeout(resolve, 250));
    await cache.get('a');
    expect(cache.reads, 'an expired entry is read again').toBe(5);
  });

  it('evicts a value cached under one key and announced by another id (announcedAs)', async () => {
    const channel = uniqueId('feed-cache');
    // Cached by key "a", announced by the id inside the value ("row-1:A1" -> "row-1").
    const cache = make({ channel, announcedAs: (value) => String(value).split(':')[0]! });
    cache.table.set('a', 'row-1:A1');
    await until('the feed is live', () => cache.live);
    expect(await cache.get('a')).toBe('row-1:A1');
    cache.table.set('a', 'row-1:A2');
    expect(await cache.get('a')).toBe('row-1:A1');
    await announce(cache, channel, 'row-1');
    expect(await cache.get('a')).toBe('row-1:A2');
    // A change made here, by id, too.
    cache.table.set('a', 'row-1:A3');
    cache.changedHereForTest('row-1');
    expect(await cache.get('a')).toBe('row-1:A3');
  });

  it('tells onChange of every announcement, and keeps listening with ttlMs 0 (nothing cached)', async () => {
    const channel = uniqueId('feed-cache');
    const heard: string[] = [];
    const cache = make({ channel, ttlMs: 0, onChange: (id) => heard.push(id) });
    await until('the feed is live', () => cache.live);
    await publisher.publish(channel, 'k1');
    await until('k1 is heard', () => heard.includes('k1'));
    await cache.get('a');
    await cache.get('a');
    expect(cache.reads).toBe(2);
  });

  it('with heartbeats, distrusts its entries once it has heard nothing for staleAfterMs, judged at each read and not by the heartbeat timer, and drops them when heard again', async () => {
    const channel = uniqueId('feed-cache');
    // The heartbeat timer first runs in a minute: no heartbeat is published and no beat judges the
    // silence, so only the clock at each read can notice that the feed heard nothing since it subscribed.
    const cache = make({ channel, heartbeat: { publisher, everyMs: 60_000, staleAfterMs: 1_000 } });
    await until('the feed is live', () => cache.live);
    expect([await cache.get('a'), await cache.get('a')]).toEqual(['A1', 'A1']);
    expect(cache.reads).toBe(1);
    // A change whose announcement is lost (the feed hears nothing).
    cache.table.set('a', 'A2');
    await until('the silent feed is no longer live', () => !cache.live, 3_000);
    expect(await cache.get('a'), 'a silent feed reads through').toBe('A2');
    expect(cache.reads).toBe(2);
    // Heard again (any message): live, and what was cached before the silence is gone.
    await publisher.publish(channel, 'some-other-row');
    await until('the feed is heard again', () => cache.live);
    expect(await cache.get('a')).toBe('A2');
    expect(cache.reads).toBe(3);
  });

  it('reads every time while the feed is not live (Redis unreachable), and with ttlMs 0', async () => {
    // Nothing listens on port 1: the subscription never comes up.
    const down = new TableCache(new Map([['a', 'A1']]), { redisUrl: 'redis://127.0.0.1:1', channel: uniqueId('feed-cache'), ttlMs: 600_000 });
    down.start();
    caches.push(down);
    const off = make({ channel: uniqueId('feed-cache'), ttlMs: 0 });
    for (const cache of [down, off]) {
      await cache.get('a');
      await cache.get('a');
      expect(cache.live).toBe(false);
      expect(cache.reads).toBe(2);
    }
  });
});
