import { describe, expect, it } from 'vitest';
import { createTestApp, expectOk } from '../helpers/app.js';

describe('GET /api/v1/health', () => {
  it('is healthy with Postgres, Redis and Temporal checked for real', async () => {
    const app = await createTestApp();
    try {
      const body = expectOk<{ status: string; checks: Record<string, string> }>(await app.inject({ method: 'GET', url: '/api/v1/health' }));
      expect(body.status).toBe('healthy');
      expect(body.checks).toEqual({ postgres: 'up', redis: 'up', temporal: 'up' });
    } finally {
      await app.close();
    }
  });

  it.each([
    ['redis', { REDIS_URL: 'redis://127.0.0.1:1' }],
    ['temporal', { TEMPORAL_ADDRESS: '127.0.0.1:1' }],
    ['postgres', { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }],
  ])('answers 503 degraded when %s is unreachable', async (name, overrides) => {
    const app = await createTestApp(overrides);
    try {
      const res = await app.inject({ method: 'GET', url: '/api/v1/health' });
      expect(res.statusCode, res.body).toBe(503);
      const body = JSON.parse(res.body) as { ok: boolean; status: string; error: string; checks: Record<string, string> };
      expect(body.ok).toBe(false);
      expect(body.status).toBe('degraded');
      expect(body.checks[name]).toBe('down');
      expect(body.error).toContain(name);
      for (const other of ['postgres', 'redis', 'temporal'].filter((n) => n !== name)) expect(body.checks[other]).toBe('up');
    } finally {
      await app.close();
    }
  });
});
