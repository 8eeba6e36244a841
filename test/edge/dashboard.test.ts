import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
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

  it('serves index.html at / without the Temporal UI address (operators get it from /api/v1/me/operator-tools)', async () => {
    const res = await app.inject({ method: 'GET', url: '/', headers: HTML });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toContain('<div id="root"></div>');
    expect(res.body).not.toContain('temporal.example.test');
  });

  it('forbids other sites to frame its pages', async () => {
    for (const url of ['/', '/keys']) {
      const res = await app.inject({ method: 'GET', url, headers: HTML });
      expect(res.headers['x-frame-options'], url).toBe('DENY');
      expect(res.headers['content-security-policy'], url).toBe("frame-ancestors 'none'");
      expect(res.headers['x-content-type-options'], url).toBe('nosniff');
    }
  });

  it('answers client-side routes with the same page, so a reload keeps the page', async () => {
    for (const url of ['/keys', '/inbox', '/sessions/abc', '/directory?q=weather', '/index.html']) {
      const res = await app.inject({ method: 'GET', url, headers: HTML });
      expect(res.statusCode, `${url}: ${res.body.slice(0, 200)}`).toBe(200);
      expect(res.body, url).toContain('<div id="root"></div>');
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

  it('sends the brotli or gzip copy the browser accepts, with Content-Encoding and Vary', async () => {
    const assets = join(DASHBOARD_DIR, 'dist/assets');
    const script = readdirSync(assets).find((name) => name.endsWith('.js'));
    expect(script).toBeDefined();
    const plain = readFileSync(join(assets, script!));
    const url = `/assets/${script}`;

    const br = await app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'br' } });
    expect(br.statusCode, br.body.slice(0, 200)).toBe(200);
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers['content-type']).toContain('javascript');
    expect(br.headers.vary).toContain('accept-encoding');
    expect(br.headers['cache-control']).toContain('immutable');
    expect(br.rawPayload.equals(readFileSync(join(assets, `${script}.br`)))).toBe(true);
    expect(brotliDecompressSync(br.rawPayload).equals(plain)).toBe(true);

    // A browser's usual header: brotli is preferred over gzip.
    const preferred = await app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'gzip, deflate, br, zstd' } });
    expect(preferred.headers['content-encoding']).toBe('br');

    const gz = await app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gz.headers.vary).toContain('accept-encoding');
    expect(gunzipSync(gz.rawPayload).equals(plain)).toBe(true);

    const identity = await app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'identity' } });
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.headers.vary).toContain('accept-encoding');
    expect(identity.rawPayload.equals(plain)).toBe(true);

    // The compressed copies are not pages of their own.
    expectError(await app.inject({ method: 'GET', url: `${url}.br` }), 404, 'not_found');
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

describe('the dashboard build', () => {
  const assets = join(DASHBOARD_DIR, 'dist/assets');
  const scripts = () => readdirSync(assets).filter((name) => name.endsWith('.js'));

  it('is a production build: no development JSX runtime in any script', () => {
    expect(scripts().length).toBeGreaterThan(0);
    for (const name of scripts()) expect(readFileSync(join(assets, name), 'utf8').includes('jsxDEV'), name).toBe(false);
  });

  it('keeps the JavaScript a first visit loads under 150 KB compressed', () => {
    // The entry script and the chunks index.html preloads; page chunks loaded later are not counted.
    const html = readFileSync(join(DASHBOARD_DIR, 'dist/index.html'), 'utf8');
    const initial = [...html.matchAll(/(?:src|href)="\/assets\/([^"]+\.js)"/g)].map((match) => match[1]!);
    expect(initial.length, html).toBeGreaterThan(0);
    const sizes = Object.fromEntries(initial.map((name) => [name, readFileSync(join(assets, `${name}.br`)).length]));
    const total = Object.values(sizes).reduce((sum, size) => sum + size, 0);
    expect(total, JSON.stringify(sizes)).toBeLessThanOrEqual(150_000);
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
