import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_TYPES_PATH, renderClientTypes } from '#client/generate';
import { createPlatformClient, PlatformApiError, unwrap } from '#client';
import { createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

let app: FastifyInstance;
let baseUrl: string;
beforeAll(async () => {
  app = await createTestApp();
  await app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app?.close();
});

describe('packages/client', () => {
  it('is in sync with the OpenAPI document: regenerating it gives the committed file', async () => {
    const fresh = await renderClientTypes(app.swagger());
    const committed = readFileSync(CLIENT_TYPES_PATH, 'utf8');
    // Not toBe(): a diff of a 300 kB file is unreadable; the message says what to do.
    expect(fresh === committed, 'packages/client/api-types.ts is stale: run `npm run generate:client` and commit the result').toBe(true);
    expect(committed).toContain('"/api/v1/discover"');
  });

  it('makes typed calls against a running edge: register, discover, balance, and errors with code and hint', async () => {
    const anonymous = createPlatformClient({ baseUrl: `${baseUrl}/` });
    const email = `${uniqueId('client')}@example.test`;
    const registered = await unwrap(anonymous.POST('/api/v1/register', { body: { email, password: 'correct horse battery staple' } }));
    expect(registered.fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);

    const api = createPlatformClient({ baseUrl, apiKey: registered.fullKey });
    const found = await unwrap(api.GET('/api/v1/discover', { params: { query: { q: 'send a text message', limit: 3 } } }));
    expect(found.results.length).toBeGreaterThan(0);
    expect(found.results.length).toBeLessThanOrEqual(3);
    expect(typeof found.results[0]!.api.id).toBe('string');
    const { balance } = await unwrap(api.GET('/api/v1/balance'));
    expect(typeof balance).toBe('number');

    const missing = await anonymous.GET('/api/v1/balance');
    expect(missing.response.status).toBe(401);
    await expect(unwrap(anonymous.GET('/api/v1/balance'))).rejects.toMatchObject({
      name: 'PlatformApiError',
      status: 401,
      code: 'missing_credentials',
      hint: expect.any(String),
    });
    const notFound = await unwrap(api.GET('/api/v1/apis/{id}', { params: { path: { id: uniqueId('nope-') } } })).catch((error: unknown) => error);
    expect(notFound).toBeInstanceOf(PlatformApiError);
    expect(notFound).toMatchObject({ status: 404, code: 'not_found' });
  });
});
