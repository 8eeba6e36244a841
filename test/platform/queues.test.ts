import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { addJob, createQueue, createRedis } from '#core/platform';
import { uniqueId } from '../helpers/settings.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

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

  it('adds jobs once Redis answers again when Redis stalled past the command timeout just as the queue was made', async () => {
    const target = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    const relay = await startTcpProxy(target.hostname, Number(target.port || 6379));
    const redis = createRedis(`redis://127.0.0.1:${relay.port}${target.pathname}`, 'request-path', { connectionName: 'queue-stall-test' });
    await new Promise((resolve) => redis.once('ready', resolve));
    const name = uniqueId('queue-stall');
    const declaration = {
      queue: name,
      name: 'probe',
      payload: z.object({}),
      options: { attempts: 1, backoff: { type: 'fixed' as const, delay: 1 }, removeOnComplete: true, removeOnFail: true },
    };
    const queue = createQueue(name, { connection: redis, prefix: name });
    try {
      // Past the request-path client's 2 s command timeout: whatever the queue sent meanwhile timed out.
      relay.hold();
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      relay.release();
      const id = await addJob(queue, declaration, {}, { jobId: 'after-the-stall' });
      expect(id).toBe('after-the-stall');
      expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
      await queue.obliterate({ force: true });
    } finally {
      await queue.close().catch(() => {});
      redis.disconnect();
      await relay.close();
    }
  });
});
