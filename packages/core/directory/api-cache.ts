import { apiChangesChannel, getMeteredApi, type MeteredApi } from '#db/metered-apis';
import type { Sql } from '#db/sql';
import { ChangeFeed } from '#core/platform';

const MAX_ENTRIES = 10_000;

/**
 * The proxy's API rows (base URL, auth scheme, prices, sealed platform key), cached in-process so a
 * metered call costs no Postgres round trip for them. Changes made with the operator CLI are pushed
 * through Redis pub/sub and evict the row at once on every instance; while that subscription is not
 * live the cache is bypassed (as the key cache does). Entries also expire after `ttlMs`, which bounds
 * how long a change made another way (a directory re-import, SQL by hand) takes to show. Unknown ids
 * are not cached, so an API added later is found on its first call.
 */
export class ApiCache {
  private readonly cache = new Map<string, { api: MeteredApi; expiresAt: number }>();
  private feed: ChangeFeed | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {}

  async start(): Promise<void> {
    if (this.options.ttlMs <= 0) return;
    this.feed = new ChangeFeed(this.options.redisUrl, apiChangesChannel(this.options.redisPrefix), {
      changed: (apiId) => this.forget(apiId),
      lost: () => this.cache.clear(),
    });
    this.feed.start();
  }

  async stop(): Promise<void> {
    this.feed?.stop();
    this.cache.clear();
  }

  /** True while changes are being received, i.e. while cached rows are used. */
  get live(): boolean {
    return this.feed?.live ?? false;
  }

  async get(apiId: string): Promise<MeteredApi | null> {
    const now = Date.now();
    const feed = this.feed;
    if (feed?.live) {
      const hit = this.cache.get(apiId);
      if (hit && hit.expiresAt > now) return hit.api;
    }
    const generation = feed?.generation;
    const api = await getMeteredApi(this.sql, apiId);
    if (api && feed?.live && generation === feed.generation) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.clear();
      this.cache.set(apiId, { api, expiresAt: now + this.options.ttlMs });
    }
    return api;
  }

  private forget(apiId: string): void {
    if (apiId === '*') this.cache.clear();
    else this.cache.delete(apiId);
  }
}
