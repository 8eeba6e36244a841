import { describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';

describe('Redis connection errors', () => {
  it('are logged, once per outage window rather than once per reconnect attempt', async () => {
    const lines: { object: Record<string, unknown>; message: string }[] = [];
    const log = { warn: (object: Record<string, unknown>, message: string) => lines.push({ object, message }) };
    // Nothing listens on port 1: every connection attempt fails at once and ioredis keeps retrying.
    const client = createRedis('redis://127.0.0.1:1', 'queue', { connectionName: 'probe', retryStrategy: () => 20 }, log);
    await new Promise((resolve) => setTimeout(resolve, 500));
    client.disconnect();
    expect(lines.length, JSON.stringify(lines)).toBe(1);
    expect(lines[0]).toMatchObject({ message: 'redis connection error', object: { redis: 'probe', err: { code: 'ECONNREFUSED' } } });
  });
});
