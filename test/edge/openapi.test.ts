import { describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';

interface Operation {
  security?: unknown[];
  parameters?: { in: string }[];
  responses: Record<string, unknown>;
}

// The specification's priced endpoints (instructions $0.01, cookbook details and doc sections $0.005,
// the proxy at the API's price).
const PRICED = [/^\/api\/v1\/apis\/\{id\}\/instructions$/, /^\/api\/v1\/cookbooks\/\{id\}$/, /^\/api\/v1\/docs\/\{slug\}$/, /^\/api\/v1\/proxy\//];

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

  it('declares the error responses of every operation: 401/403 when authenticated, 402 when priced, 404 for a named resource, 429', async () => {
    const app = await createTestApp();
    try {
      const doc = JSON.parse((await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).body) as {
        paths: Record<string, Record<string, Operation>>;
      };
      const missing: string[] = [];
      let operations = 0;
      for (const [path, methods] of Object.entries(doc.paths)) {
        if (!path.startsWith('/api/')) continue;
        for (const [method, operation] of Object.entries(methods)) {
          operations += 1;
          const has = (status: number) => String(status) in operation.responses;
          const need = (status: number, why: string) => {
            if (!has(status)) missing.push(`${method.toUpperCase()} ${path}: no ${status} (${why})`);
          };
          if (!Object.keys(operation.responses).some((status) => /^[45]\d\d$/.test(status)))
            missing.push(`${method.toUpperCase()} ${path}: no error response`);
          if (operation.security?.length) {
            need(401, 'authenticated');
            need(403, 'authenticated');
          }
          if (PRICED.some((pattern) => pattern.test(path))) need(402, 'priced');
          if (operation.parameters?.some((parameter) => parameter.in === 'path')) need(404, 'names a resource');
          // Health checks are not rate limited (load balancers poll them); every other route is.
          if (path !== '/api/v1/health') need(429, 'rate limited');
        }
      }
      expect(operations).toBeGreaterThan(40);
      expect(missing, missing.join('\n')).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
