import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, expectError } from '../helpers/app.js';
import { DASHBOARD_DIR } from '../helpers/dashboard-build.js';

const HTML = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

describe('dashboard assets at the site root', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createTestApp({ TEMPORAL_UI_URL: 'http://temporal.example.test:8233' });
  });
  afterAll(async () => app.close());

  it('serves index.html at / with the Temporal UI address injected', async () => {
    const res = await app.inject({ method: 'GET', url: '/', headers: HTML });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toContain('<div id="root"></div>');
    expect(res.body).toContain('<meta name="temporal-ui-url" content="http://temporal.example.test:8233" />');
  });

  it('answers client-side routes with the same page, so a reload keeps the page', async () => {
    for (const url of ['/keys', '/inbox', '/sessions/abc', '/directory?q=weather', '/index.html']) {
      const res = await app.inject({ method: 'GET', url, headers: HTML });
      expect(res.statusCode, `${url}: ${res.body.slice(0, 200)}`).toBe(200);
      expect(res.body, url).toContain('temporal.example.test');
    }
  });

  it('serves hashed assets with long-lived caching', async () => {
    const assets = readdirSync(join(DASHBOARD_DIR, 'dist/assets'));
    const script = assets.find((name) => name.endsWith('.js'));
    expect(script, assets.join(', ')).toBeDefined();
    const res = await app.inject({ method: 'GET', url: `/assets/${script}` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('javascript');
    expect(res.headers['cache-control']).toContain('immutable');
  });

  it('keeps JSON 404s for API paths, non-GET requests and requests that do not want HTML', async () => {
    expectError(await app.inject({ method: 'GET', url: '/api/v1/no-such-thing', headers: HTML }), 404, 'not_found');
    expectError(await app.inject({ method: 'GET', url: '/api/nope', headers: HTML }), 404, 'not_found');
    expectError(await app.inject({ method: 'GET', url: '/admin/nope', headers: HTML }), 404, 'not_found');
    expectError(await app.inject({ method: 'GET', url: '/keys', headers: { accept: 'application/json' } }), 404, 'not_found');
    expectError(await app.inject({ method: 'POST', url: '/keys', headers: HTML, payload: {} }), 404, 'not_found');
    expectError(await app.inject({ method: 'GET', url: '/assets/missing-file.js' }), 404, 'not_found');
  });
});

describe('dashboard not built', () => {
  it('answers the root with a page saying how to build it, and API 404s stay JSON', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'no-dashboard-'));
    const app = await createTestApp({ DASHBOARD_DIST: empty });
    try {
      const res = await app.inject({ method: 'GET', url: '/', headers: HTML });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('text/html');
      expect(res.body).toContain('npm run build:dashboard');
      const page = await app.inject({ method: 'GET', url: '/keys', headers: HTML });
      expect(page.body).toContain('npm run build:dashboard');
      expectError(await app.inject({ method: 'GET', url: '/api/v1/nope', headers: HTML }), 404, 'not_found');
    } finally {
      await app.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
