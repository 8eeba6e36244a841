import { afterAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { loadEdgeSettings } from '#edge/config';
import { createTestApp, expectError } from '../helpers/app.js';
import { TEST_PASSWORD } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

// Behind a proxy, the client's address is what the proxy appended to X-Forwarded-For, not what the
// client wrote there: a made-up X-Forwarded-For per request must not escape per-address limits
// (registration, and with it the sign-up credit).

const apps: FastifyInstance[] = [];
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
});

describe('TRUST_PROXY', () => {
  it('is a hop count or a list of trusted networks; true is refused with a message', () => {
    expect(loadEdgeSettings({ TRUST_PROXY: '1' }).TRUST_PROXY).toBe(1);
    expect(loadEdgeSettings({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).TRUST_PROXY).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(loadEdgeSettings({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(() => loadEdgeSettings({ TRUST_PROXY: 'true' })).toThrow(/TRUST_PROXY.*number of proxies/s);
    expect(() => loadEdgeSettings({ TRUST_PROXY: 'everyone' })).toThrow(/TRUST_PROXY/);
  });

  it('counts registrations per real client address, whatever the client writes in X-Forwarded-For', async () => {
    for (const trust of ['1', '127.0.0.1']) {
      const app = await createTestApp({ TRUST_PROXY: trust, RATE_LIMIT_REGISTER_MAX: '2', REDIS_PREFIX: uniqueId('xff') });
      apps.push(app);
      const client = `203.0.113.${Math.floor(Math.random() * 200) + 1}`;
      const register = (spoofed: string) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/register',
          // The proxy (the test's 127.0.0.1 socket) appended the real client after what the client sent.
          headers: { 'x-forwarded-for': `${spoofed}, ${client}` },
          payload: { email: `${uniqueId('xff')}@example.test`, password: TEST_PASSWORD },
        });
      expect((await register('198.51.100.1')).statusCode, trust).toBe(201);
      expect((await register('198.51.100.2')).statusCode, trust).toBe(201);
      expectError(await register('198.51.100.3'), 429, 'rate_limited');
    }
  });
});
