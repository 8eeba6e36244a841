import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { addJob, createQueue, createRedis } from '#core/platform';
import { uniqueId } from '../helpers/settings.js';

/**
 * A TCP relay to the real Redis whose answers can be held back: while `hold` is on, what Redis
 * sends is kept and delivered once it is off, as a client sees a Redis (or its own event loop) that
 * stalls for a while.
 */
async function stallingRelay(redisUrl: string) {
  const target = new URL(redisUrl);
  const held: Array<() => void> = [];
  let hold = false;
  const sockets: Socket[] = [];
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) });
    sockets.push(client, upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => (hold ? held.push(() => client.write(chunk)) : client.write(chunk)));
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}${target.pathname}`,
    hold() {
      hold = true;
    },
    release() {
      hold = false;
      for (const send of held.splice(0)) send();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

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
    const relay = await stallingRelay(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    const redis = createRedis(relay.url, 'request-path', { connectionName: 'queue-stall-test' });
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
