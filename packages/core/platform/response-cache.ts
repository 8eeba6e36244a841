import type { Redis } from 'ioredis';

/**
 * A short-lived shared cache of public, read-only answers (search, discovery, categories) in Redis,
 * so every edge instance benefits and none keeps state of its own. Redis trouble never fails a
 * request: the answer is then computed directly. Votes and imports show up within the TTL.
 */
export async function cachedJson<T>(redis: Redis, key: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
  if (ttlSeconds <= 0) return compute();
  try {
    const hit = await redis.get(key);
    if (hit !== null) return JSON.parse(hit) as T;
  } catch {
    return compute();
  }
  const value = await compute();
  redis.set(key, JSON.stringify(value), 'EX', ttlSeconds).catch(() => {});
  return value;
}

/** cachedJson for answers rendered to JSON text by the caller: stored and answered as they are. */
export async function cachedText(redis: Redis, key: string, ttlSeconds: number, compute: () => Promise<string>): Promise<string> {
  if (ttlSeconds <= 0) return compute();
  try {
    const hit = await redis.get(key);
    if (hit !== null) return hit;
  } catch {
    return compute();
  }
  const value = await compute();
  redis.set(key, value, 'EX', ttlSeconds).catch(() => {});
  return value;
}
