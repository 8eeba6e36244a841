import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { createTestApp, expectError } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

describe('queue board', () => {
  it('is behind operator Basic auth and lists the queues found in Redis', async () => {
    const prefix = uniqueId('board');
    const app = await createTestApp({ OPERATOR_BASIC_AUTH: 'operator:s3cret-pass', REDIS_PREFIX: prefix });
    const connection = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const queue = new Queue('usage-events', { connection, prefix });
    try {
      await queue.add('probe', { n: 1 });
      const denied = await app.inject({ method: 'GET', url: '/admin/queues/api/queues' });
      expectError(denied, 401, 'missing_credentials');
      expect(denied.headers['www-authenticate']).toContain('Basic');
      const wrong = await app.inject({
        method: 'GET',
        url: '/admin/queues/api/queues',
        headers: { authorization: `Basic ${Buffer.from('operator:nope').toString('base64')}` },
      });
      expectError(wrong, 401);
      const auth = { authorization: `Basic ${Buffer.from('operator:s3cret-pass').toString('base64')}` };
      const res = await app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: auth });
      expect(res.statusCode, res.body).toBe(200);
      expect((JSON.parse(res.body) as { queues: { name: string }[] }).queues.map((q) => q.name)).toContain('usage-events');
      const page = await app.inject({ method: 'GET', url: '/admin/queues', headers: auth });
      expect(page.statusCode, page.body.slice(0, 200)).toBe(200);
      expect(page.headers['content-type']).toContain('text/html');
      // Its actions change queues: from another origin (a page posting with the browser's Basic
      // credentials) or with no origin at all they are refused; from the site itself they run.
      const pause = (headers: Record<string, string>) =>
        app.inject({ method: 'PUT', url: '/admin/queues/api/queues/usage-events/pause', headers: { ...auth, ...headers } });
      expectError(await pause({ origin: 'https://evil.example' }), 403, 'csrf_failed');
      expectError(await pause({}), 403, 'csrf_failed');
      const paused = await pause({ origin: new URL(app.deps.settings.PUBLIC_URL).origin });
      expect(paused.statusCode, paused.body).toBeLessThan(300);
      expect(await queue.isPaused()).toBe(true);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
      await app.close();
    }
  });

  it('throttles wrong operator passwords per address with 429 and Retry-After', async () => {
    const app = await createTestApp({ OPERATOR_BASIC_AUTH: 'operator:s3cret-pass', REDIS_PREFIX: uniqueId('board'), RATE_LIMIT_LOGIN_MAX: '2' });
    const wrong = { authorization: `Basic ${Buffer.from('operator:guess').toString('base64')}` };
    try {
      expectError(await app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: wrong }), 401, 'missing_credentials');
      expectError(await app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: wrong }), 401, 'missing_credentials');
      const limited = await app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: wrong });
      expectError(limited, 429, 'rate_limited');
      expect(Number(limited.headers['retry-after']), limited.body).toBeGreaterThan(0);
      expect(limited.headers['x-ratelimit-limit'], limited.body).toBe('2');
    } finally {
      await app.close();
    }
  });

  it('is not mounted without OPERATOR_BASIC_AUTH', async () => {
    const app = await createTestApp();
    try {
      expectError(await app.inject({ method: 'GET', url: '/admin/queues' }), 404, 'not_found');
    } finally {
      await app.close();
    }
  });
});
