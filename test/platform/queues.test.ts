import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { addJob, createQueue, createRedis } from '#core/platform';

describe('createQueue', () => {
  afterEach(() => vi.restoreAllMocks());

  it("leaves Redis connection failures to the connection's own log instead of printing each to stderr, and reports other errors", async () => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => {});
    const warnings: string[] = [];
    const redis = createRedis('redis://127.0.0.1:1', 'request-path', { connectionName: 'queue-test' });
    const queue = createQueue('queue-test', { connection: redis, prefix: 'queue-test' }, { warn: (_object, message) => warnings.push(message) });
    try {
      // Several reconnect attempts fail meanwhile; a plain BullMQ queue prints a trace for each.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(printed).not.toHaveBeenCalled();
      expect(warnings).toEqual([]);
      queue.emit('error', new Error('an unexpected queue error'));
      expect(warnings).toEqual(['queue error']);
    } finally {
      redis.disconnect();
      await queue.close().catch(() => {});
    }
  });

  it('addJob gives up after its timeout while Redis is away, instead of waiting as long as Redis is (a plain BullMQ add does)', async () => {
    const redis = createRedis('redis://127.0.0.1:1', 'request-path', { connectionName: 'queue-test' });
    const queue = createQueue('queue-test', { connection: redis, prefix: 'queue-test' });
    const declaration = {
      queue: 'queue-test',
      name: 'probe',
      payload: z.object({}),
      options: { attempts: 1, backoff: { type: 'fixed' as const, delay: 1 } },
    };
    try {
      const started = Date.now();
      await expect(addJob(queue, declaration, {}, {}, 300)).rejects.toThrow('queueing a probe job (is Redis reachable?) timed out after 300 ms');
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      redis.disconnect();
      await queue.close().catch(() => {});
    }
  });
});
