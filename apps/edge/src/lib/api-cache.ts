import type { Redis } from 'ioredis';
import { apiChangesChannel, getMeteredApi, type MeteredApi } from '../../../../db/src/metered-apis.js';
import { createRedis } from '../../../../db/src/redis.js';
import type { Sql } from '../../../../db/src/sql.js';

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
  private subscriber: Redis | null = null;
  private subscribed = false;
  /** Bumped by every eviction: a row read before an eviction is not stored after it. */
  private generation = 0;

  constructor(
    private readonly sql: Sql,
    private readonly options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {}

  async start(): Promise<void> {
    if (this.options.ttlMs <= 0) return;
    const subscriber = createRedis(this.options.redisUrl, 'subscriber', { lazyConnect: true });
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, apiId: string) => this.evict(apiId));
    subscriber.on('ready', () => {
      subscriber.subscribe(apiChangesChannel(this.options.redisPrefix)).then(
        () => {
          this.subscribed = true;
        },
        () => {
          this.subscribed = false;
        },
      );
    });
    const lost = () => {
      this.subscribed = false;
      this.generation += 1;
      this.cache.clear();
    };
    subscriber.on('close', lost);
    subscriber.on('end', lost);
    subscriber.connect().catch(() => {});
  }

  async stop(): Promise<void> {
    this.subscribed = false;
    this.cache.clear();
    if (this.subscriber) {
      this.subscriber.removeAllListeners('close');
      this.subscriber.disconnect();
    }
  }

  /** True while changes are being received, i.e. while cached rows are used. */
  get live(): boolean {
    return this.subscribed;
  }

  async get(apiId: string): Promise<MeteredApi | null> {
    const now = Date.now();
    if (this.subscribed) {
      const hit = this.cache.get(apiId);
      if (hit && hit.expiresAt > now) return hit.api;
    }
    const generation = this.generation;
    const api = await getMeteredApi(this.sql, apiId);
    if (api && this.subscribed && generation === this.generation) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.clear();
      this.cache.set(apiId, { api, expiresAt: now + this.options.ttlMs });
    }
    return api;
  }

  evict(apiId: string): void {
    this.generation += 1;
    if (apiId === '*') this.cache.clear();
    else this.cache.delete(apiId);
  }
}
