import type { Redis } from 'ioredis';

/**
 * A short-lived shared cache of public, read-only answers (search, discovery, categories) in Redis,
 * so every edge instance benefits and none keeps state of its own. Redis trouble never fails a
 * request: the answer is then computed directly. Votes and imports show up within the TTL.
 */
async function readThrough<T>(
  ttlSeconds: number,
  read: () => Promise<T | null>,
  write: (value: T) => Promise<unknown>,
  compute: () => Promise<T>,
): Promise<T> {
  if (ttlSeconds <= 0) return compute();
  try {
    const hit = await read();
    if (hit !== null) return hit;
  } catch {
    return compute();
  }
  const value = await compute();
  write(value).catch(() => {});
  return value;
}

/** An answer stored as JSON. */
export async function cachedJson<T>(redis: Redis, key: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
  return readThrough(
    ttlSeconds,
    async () => {
      const hit = await redis.get(key);
      return hit === null ? null : (JSON.parse(hit) as T);
    },
    (value) => redis.set(key, JSON.stringify(value), 'EX', ttlSeconds),
    compute,
  );
}

/** An answer rendered to JSON text by the caller: stored and answered as it is. */
export async function cachedText(redis: Redis, key: string, ttlSeconds: number, compute: () => Promise<string>): Promise<string> {
  return readThrough(
    ttlSeconds,
    () => redis.get(key),
    (value) => redis.set(key, value, 'EX', ttlSeconds),
    compute,
  );
}

/** An answer rendered to JSON bytes by the caller: stored and answered as bytes, never decoded. */
export async function cachedBytes(redis: Redis, key: string, ttlSeconds: number, compute: () => Promise<Buffer>): Promise<Buffer> {
  return readThrough(
    ttlSeconds,
    () => redis.getBuffer(key),
    (value) => redis.set(key, value, 'EX', ttlSeconds),
    compute,
  );
}
