import { apiChangesChannel, getMeteredApi, type MeteredApi } from '#db/metered-apis';
import type { Sql } from '#db/sql';
import { FeedCache } from '#core/platform';

const MAX_ENTRIES = 10_000;

/**
 * The proxy's API rows (base URL, auth scheme, prices, sealed platform key), cached in-process so a
 * metered call costs no Postgres round trip for them. Changes made with the operator CLI are pushed
 * through Redis pub/sub and evict the row at once on every instance; while that subscription is not
 * live the cache is bypassed (FeedCache). Entries also expire after `ttlMs`, which bounds how long a
 * change made another way (a directory re-import, SQL by hand) takes to show. Unknown ids are not
 * cached, so an API added later is found on its first call.
 */
export class ApiCache extends FeedCache<MeteredApi | null> {
  constructor(
    private readonly sql: Sql,
    options: { redisUrl: string; redisPrefix: string; ttlMs: number },
  ) {
    super({
      redisUrl: options.redisUrl,
      channel: apiChangesChannel(options.redisPrefix),
      ttlMs: options.ttlMs,
      maxEntries: MAX_ENTRIES,
      keep: (api) => api !== null,
    });
  }

  get(apiId: string): Promise<MeteredApi | null> {
    return this.read(apiId, () => getMeteredApi(this.sql, apiId));
  }
}
