import type { Redis } from 'ioredis';
import { FeedCache, PlatformError, type FeedCacheOptions } from '#core/platform';
import { hashKey, keyShapeProblem } from '#contracts/key-format';
import { findKeyByHash, touchKeys, type KeyRow } from '#db/keys';
import type { Sql } from '#db/sql';

/** Channel on which any instance announces that a key changed (disabled, enabled, renamed, revoked). */
export const keyChangesChannel = (redisPrefix: string) => `${redisPrefix}:key-changes`;

/** Tells every edge instance to drop its cached copy of a key. Call after any change to a key row. */
export async function publishKeyChange(redis: Redis, redisPrefix: string, keyId: string): Promise<void> {
  await redis.publish(keyChangesChannel(redisPrefix), keyId);
}

/** How long a failed announcement is retried: past the cache TTL the other instances forget the key anyway. */
const ANNOUNCE_RETRY_MAX_MS = 120_000;

export interface KeyVerifierLog {
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/**
 * Throws the specification's 401/403 for a key that can no longer authenticate: revoked, disabled
 * or expired. An MCP client's grant is such a key, and its refusals say so.
 */
export function assertKeyUsable(key: KeyRow): void {
  const grant = key.oauth_grant_id !== null;
  if (key.status === 'revoked') {
    throw grant
      ? new PlatformError('key_revoked', `Access for ${key.oauth_client_name ?? 'this MCP client'} has been revoked`, {
          hint: 'The grant was revoked on the Keys page; connect the client again to be asked for consent anew.',
        })
      : new PlatformError('key_revoked', 'API key has been revoked', { hint: 'Revocation is permanent; create a new key.' });
  }
  if (key.status === 'disabled') {
    throw new PlatformError('key_disabled', grant ? 'Access for this MCP client is disabled' : 'API key is disabled', {
      hint: `Enable it with PATCH /api/v1/keys/${key.id} {"status":"enabled"} or in the dashboard.`,
    });
  }
  if (key.expires_at && key.expires_at.getTime() <= Date.now()) {
    throw grant
      ? new PlatformError('key_expired', 'Access for this MCP client has expired', {
          hint: 'The expiry chosen at consent has passed; connect the client again to be asked for consent anew.',
        })
      : new PlatformError('key_expired', 'Agent key has expired', { hint: 'Create a new agent key.' });
  }
}

const MAX_CACHE_ENTRIES = 50_000;
const TOUCH_FLUSH_MS = 5_000;

/** Key rows by the SHA-256 of the key (hex), announced by key id. */
class KeyRows extends FeedCache<KeyRow | null> {
  constructor(
    private readonly sql: Sql,
    options: Omit<FeedCacheOptions<KeyRow | null>, 'maxEntries' | 'keep' | 'announcedAs'>,
  ) {
    // Unknown keys are not kept (a key created later is found at once); a row is announced by its id.
    super({ ...options, maxEntries: MAX_CACHE_ENTRIES, keep: (key) => key !== null, announcedAs: (key) => key!.id });
  }

  byHash(hash: Buffer): Promise<KeyRow | null> {
    return this.read(hash.toString('hex'), () => findKeyByHash(this.sql, hash));
  }

  evict(keyId: string): void {
    this.changedHere(keyId);
  }
}

/**
 * Verifies presented API keys. Shape and checksum are checked before any I/O; known keys are cached
 * in-process by SHA-256 for `ttlMs` (a FeedCache). Changes are pushed to every instance through Redis
 * pub/sub, and while that subscription is not live the cache is bypassed, so a revocation is never
 * missed for longer than a round trip. `lastUsedAt` is recorded in batches, off the request path.
 */
export class KeyVerifier {
  private readonly rows: KeyRows;
  private readonly touched = new Set<string>();
  private flushTimer: NodeJS.Timeout | null = null;

  private readonly listeners = new Set<(keyId: string) => void>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly options: {
      redisUrl: string;
      redisPrefix: string;
      ttlMs: number;
      /** Publishes announcements and the feed's heartbeats (without it there are no heartbeats). */
      publisher?: Redis;
      log?: KeyVerifierLog;
    },
  ) {
    const { publisher, log } = options;
    this.rows = new KeyRows(sql, {
      redisUrl: options.redisUrl,
      channel: keyChangesChannel(options.redisPrefix),
      ttlMs: options.ttlMs,
      // Other instances' changes reach the event streams too, whatever the cache's TTL.
      onChange: (keyId) => {
        for (const listener of this.listeners) listener(keyId);
      },
      heartbeat: publisher && {
        publisher,
        onStateChange: (state, silentForMs) => {
          if (state === 'silent')
            log?.warn({ silentForMs }, 'key change feed is silent: keys are read from Postgres on every call until it is heard again');
          else log?.info({ silentForMs }, 'key change feed heard again: key cache back in use');
        },
      },
    });
  }

  async start(): Promise<void> {
    this.rows.start();
    this.flushTimer = setInterval(() => void this.flushTouched(), TOUCH_FLUSH_MS);
    this.flushTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flushTouched();
    this.rows.stop();
  }

  /** Returns the key row for a presented key, or throws 401/403 as the specification's auth table says. */
  async verify(presented: string): Promise<KeyRow> {
    const problem = keyShapeProblem(presented);
    if (problem === 'prefix') {
      throw new PlatformError('invalid_key', 'API key must start with service_sk_', {
        hint: 'Send a key created with POST /api/v1/keys, as "Authorization: Bearer service_sk_..." or "X-API-Key: service_sk_...".',
      });
    }
    if (problem) {
      throw new PlatformError('invalid_key', 'API key is malformed', {
        hint: 'A key is service_sk_ followed by 48 lowercase hex digits; check it was copied whole.',
      });
    }
    const key = await this.rows.byHash(hashKey(presented));
    if (!key)
      throw new PlatformError('invalid_key', 'API key not found', { hint: 'The key may have been mistyped; create a new one in the dashboard.' });
    assertKeyUsable(key);
    this.touched.add(key.id);
    return key;
  }

  /** Records that a key verified some other way (an MCP client's access token) was used. */
  touch(keyId: string): void {
    this.touched.add(keyId);
  }

  /** Called with the id of every key changed anywhere (announced here or by another instance). */
  onChange(listener: (keyId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * After a key row changed and the change committed: this instance forgets the key at once and
   * tells the others. A refused publish is retried in the background (backing off to once a
   * second, for up to two minutes) instead of failing the request whose change already committed.
   */
  announce(keyId: string): void {
    this.evict(keyId);
    for (const listener of this.listeners) listener(keyId);
    const publisher = this.options.publisher;
    if (!publisher) return;
    const started = Date.now();
    const attempt = (delayMs: number) => {
      publishKeyChange(publisher, this.options.redisPrefix, keyId).catch((error: unknown) => {
        if (this.stopped || Date.now() - started > ANNOUNCE_RETRY_MAX_MS) {
          this.options.log?.warn(
            { keyId, err: { message: (error as Error).message } },
            'key change could not be announced; other instances forget the key when their cache entry expires',
          );
          return;
        }
        const timer = setTimeout(() => {
          this.retries.delete(timer);
          attempt(Math.min(delayMs * 2, 1_000));
        }, delayMs);
        timer.unref();
        this.retries.add(timer);
      });
    };
    attempt(50);
  }

  /** Drops a key this instance just changed, before the change is announced to the others. */
  evict(keyId: string): void {
    this.rows.evict(keyId);
  }

  private async flushTouched(): Promise<void> {
    if (this.touched.size === 0) return;
    const ids = [...this.touched];
    this.touched.clear();
    await touchKeys(this.sql, ids).catch(() => {
      for (const id of ids) this.touched.add(id);
    });
  }
}
