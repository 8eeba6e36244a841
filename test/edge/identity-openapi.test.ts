import { describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';

interface Operation {
  tags?: string[];
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> };
  responses: Record<string, { content?: Record<string, { schema: { properties?: Record<string, unknown> } }> }>;
}

describe('OpenAPI document: identity routes', () => {
  it('lists every identity route with its schemas, tags and security', async () => {
    const app = await createTestApp();
    try {
      const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
      const doc = JSON.parse(res.body) as { paths: Record<string, Record<string, Operation>> };
      const expected: Array<[string, string, number, string]> = [
        ['/api/v1/register', 'post', 201, 'accounts'],
        ['/api/v1/keys', 'post', 201, 'keys'],
        ['/api/v1/keys', 'get', 200, 'keys'],
        ['/api/v1/keys/{id}', 'patch', 200, 'keys'],
        ['/api/v1/keys/{id}', 'delete', 200, 'keys'],
        ['/api/v1/agent-keys', 'get', 200, 'agent keys'],
        ['/api/v1/agent-keys', 'post', 201, 'agent keys'],
        ['/api/v1/agent-keys/{id}', 'delete', 200, 'agent keys'],
        ['/api/auth/login', 'post', 200, 'dashboard session'],
        ['/api/auth/logout', 'post', 200, 'dashboard session'],
        ['/api/auth/session', 'get', 200, 'dashboard session'],
      ];
      for (const [path, method, status, tag] of expected) {
        const op = doc.paths[path]?.[method];
        expect(op, `${method.toUpperCase()} ${path} is missing from ${Object.keys(doc.paths).join(', ')}`).toBeDefined();
        expect(op?.tags).toContain(tag);
        const schema = op?.responses[String(status)]?.content?.['application/json']?.schema;
        expect(schema?.properties, `${method} ${path} ${status} response schema`).toHaveProperty('ok');
      }
      expect(doc.paths['/api/v1/register']?.post?.requestBody?.content['application/json']?.schema.required?.sort()).toEqual(['email', 'password']);
      expect(doc.paths['/api/v1/keys']?.post?.responses['201']?.content?.['application/json']?.schema.properties).toHaveProperty('fullKey');
      expect(Object.keys(doc.paths['/api/v1/agent-keys']?.post?.requestBody?.content['application/json']?.schema.properties ?? {}).sort()).toEqual([
        'allowedApis',
        'expiresAt',
        'name',
        'spendLimit',
      ]);
      for (const status of ['400', '401', '403', '404', '409', '429']) {
        const errorSchema = doc.paths['/api/v1/keys/{id}']?.patch?.responses[status]?.content?.['application/json']?.schema;
        expect(Object.keys(errorSchema?.properties ?? {}), `PATCH /keys/{id} ${status}`).toEqual(
          expect.arrayContaining(['ok', 'error', 'code', 'hint']),
        );
      }
      expect(doc.paths['/api/v1/register']?.post?.responses).toHaveProperty('409');
      expect(doc.paths['/api/v1/keys']?.get?.security).toBeDefined();
      expect(doc.paths['/api/v1/register']?.post?.security).toBeUndefined();
      expect(doc.paths['/api/auth/login']?.post?.security).toBeUndefined();
    } finally {
      await app.close();
    }
  });
});
