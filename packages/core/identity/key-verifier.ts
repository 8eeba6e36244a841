import type { Redis } from 'ioredis';
import { ChangeFeed } from '#core/platform';
import { PlatformError } from '#core/platform';
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

interface CacheEntry {
  key: KeyRow;
  expiresAt: number;
}

const MAX_CACHE_ENTRIES = 50_000;
const TOUCH_FLUSH_MS = 5_000;

/**
 * Verifies presented API keys. Shape and checksum are checked before any I/O; known keys are cached
 * in-process by SHA-256 for `ttlMs`. Changes are pushed to every instance through Redis pub/sub, and
 * while that subscription is not live the cache is bypassed, so a revocation is never missed for
 * longer than a round trip. `lastUsedAt` is recorded in batches, off the request path.
 */
export class KeyVerifier {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly hashById = new Map<string, string>();
  private readonly touched = new Set<string>();
  private feed: ChangeFeed | null = null;
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
  ) {}

  async start(): Promise<void> {
    const { publisher, log } = this.options;
    this.feed = new ChangeFeed(
      this.options.redisUrl,
      keyChangesChannel(this.options.redisPrefix),
      {
        changed: (keyId) => {
          this.forget(keyId);
          for (const listener of this.listeners) listener(keyId);
        },
        lost: () => {
          this.cache.clear();
          this.hashById.clear();
        },
      },
      publisher && {
        publisher,
        onStateChange: (state, silentForMs) => {
          if (state === 'silent') log?.warn({ silentForMs }, 'key change feed is silent: keys are read from Postgres on every call until it is heard again');
          else log?.info({ silentForMs }, 'key change feed heard again: key cache back in use');
        },
      },
    );
    this.feed.start();
    this.flushTimer = setInterval(() => void this.flushTouched(), TOUCH_FLUSH_MS);
    this.flushTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flushTouched();
    this.feed?.stop();
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
    const hash = hashKey(presented);
    const key = await this.lookup(hash);
    if (!key) throw new PlatformError('invalid_key', 'API key not found', { hint: 'The key may have been mistyped; create a new one in the dashboard.' });
    if (key.status === 'revoked') throw new PlatformError('key_revoked', 'API key has been revoked', { hint: 'Revocation is permanent; create a new key.' });
    if (key.status === 'disabled') {
      throw new PlatformError('key_disabled', 'API key is disabled', { hint: `Enable it with PATCH /api/v1/keys/${key.id} {"status":"enabled"} or in the dashboard.` });
    }
    if (key.expires_at && key.expires_at.getTime() <= Date.now()) {
      throw new PlatformError('key_expired', 'Agent key has expired', { hint: 'Create a new agent key.' });
    }
    this.touched.add(key.id);
    return key;
  }

  private async lookup(hash: Buffer): Promise<KeyRow | null> {
    const cacheKey = hash.toString('hex');
    const now = Date.now();
    const feed = this.feed;
    if (feed?.live) {
      const hit = this.cache.get(cacheKey);
      if (hit && hit.expiresAt > now) return hit.key;
    }
    const generation = feed?.generation;
    const key = await findKeyByHash(this.sql, hash);
    // A change published while the row was being read may not be in it: serve it, but don't cache it.
    if (key && feed?.live && this.options.ttlMs > 0 && generation === feed.generation) {
      if (this.cache.size >= MAX_CACHE_ENTRIES) {
        this.cache.clear();
        this.hashById.clear();
      }
      this.cache.set(cacheKey, { key, expiresAt: now + this.options.ttlMs });
      this.hashById.set(key.id, cacheKey);
    }
    return key;
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
          this.options.log?.warn({ keyId, err: { message: (error as Error).message } }, 'key change could not be announced; other instances forget the key when their cache entry expires');
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
    this.feed?.invalidate();
    this.forget(keyId);
  }

  private forget(keyId: string): void {
    const cacheKey = this.hashById.get(keyId);
    if (cacheKey) this.cache.delete(cacheKey);
    this.hashById.delete(keyId);
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
