import { afterEach, describe, expect, it, vi } from 'vitest';
import { createQueue, createRedis } from '#core/platform';

describe('createQueue', () => {
  afterEach(() => vi.restoreAllMocks());

  it('leaves Redis connection failures to the connection\'s own log instead of printing each to stderr, and reports other errors', async () => {
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
});
