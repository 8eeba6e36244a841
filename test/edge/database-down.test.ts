import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { generateKey } from '#contracts/key-format';
import { bearer, createTestApp, expectError } from '../helpers/app.js';

// Postgres unreachable: callers get a 503 they can retry (with Retry-After), never a bare 500, and
// the edge keeps serving.

describe('with Postgres unreachable', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    // Nothing listens on port 1: every connection attempt is refused at once.
    app = await createTestApp({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/unreachable' });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('answers API calls 503 service_unavailable with Retry-After, and health says which dependency is down', async () => {
    const key = generateKey().fullKey;
    for (const url of ['/api/v1/balance', '/api/v1/keys', '/api/v1/cookbooks']) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(key) });
      expectError(res, 503, 'service_unavailable');
      expect(res.headers['retry-after'], url).toBe('5');
    }
    const health = await app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(health.statusCode).toBe(503);
    expect(JSON.parse(health.body)).toMatchObject({ status: 'degraded', checks: { postgres: 'down' } });
  });
});
