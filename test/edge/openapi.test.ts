import { describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';

describe('OpenAPI', () => {
  it('serves a document generated from the route schemas and a reference page', async () => {
    const app = await createTestApp();
    try {
      const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      expect(res.statusCode, res.body).toBe(200);
      const doc = JSON.parse(res.body) as { openapi: string; paths: Record<string, unknown> };
      expect(doc.openapi).toMatch(/^3\./);
      expect(Object.keys(doc.paths)).toContain('/api/v1/health');
      const page = await app.inject({ method: 'GET', url: '/api/v1/reference' });
      expect([200, 302]).toContain(page.statusCode);
    } finally {
      await app.close();
    }
  });
});
