import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/** Where `npm run build:dashboard` writes the dashboard, unless DASHBOARD_DIST says otherwise. */
export const DEFAULT_DASHBOARD_DIST = fileURLToPath(new URL('../../../dashboard/dist', import.meta.url));

/** Paths that are never dashboard pages: their unknown routes stay JSON 404s. */
const NOT_PAGES = /^\/(api|admin)(\/|$)/;

const MISSING_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dashboard not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem; line-height: 1.5">
<h1>The dashboard has not been built yet</h1>
<p>Run <code>npm run build:dashboard</code> (or <code>npm run up</code>, which builds it when missing), then reload this page.</p>
<p>The API is available at <a href="/api/v1/health">/api/v1</a>; its reference is at <a href="/api/v1/reference">/api/v1/reference</a>.</p>
</body></html>
`;

/** True for a browser navigation to a client-side route: GET/HEAD, not an API path, wants HTML. */
export function isPageRequest(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = request.url.split('?')[0] ?? '/';
  if (NOT_PAGES.test(path)) return false;
  return (request.headers.accept ?? '').includes('text/html');
}

/**
 * Serves the built dashboard at the site root: hashed assets from apps/dashboard/dist with long
 * caching (precompressed by the build), and index.html for `/` and
 * as the fallback of unknown page paths, so client-side routes survive a reload. Unknown /api/*
 * paths keep their JSON 404s. Without a build, the root explains how to make one.
 */
export default fp(
  async function dashboardPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const dist = resolve(settings.DASHBOARD_DIST ?? DEFAULT_DASHBOARD_DIST);
    const indexFile = join(dist, 'index.html');
    const built = existsSync(indexFile);

    let page = MISSING_PAGE;
    if (built) {
      // Nothing is injected: the Temporal UI's address is for operators only (GET /api/v1/me/operator-tools).
      page = readFileSync(indexFile, 'utf8');
      await app.register(fastifyStatic, {
        root: dist,
        prefix: '/',
        index: false,
        // One route per built file (no wildcard), so every other path reaches the not-found handler.
        wildcard: false,
        // The build writes a brotli and a gzip copy of each asset (see vite.config.ts): the file the
        // browser's Accept-Encoding prefers is sent with Content-Encoding and Vary: Accept-Encoding,
        // the plain one to a client that accepts neither. The copies get no routes of their own.
        preCompressed: true,
        globIgnore: ['**/*.br', '**/*.gz'],
        decorateReply: false,
        // index.html only leaves through sendPage.
        allowedPath: (pathName) => pathName !== '/index.html',
        // Vite puts a content hash in every asset name, so assets can be cached for good.
        setHeaders(reply, path) {
          reply.header('Cache-Control', path.startsWith(join(dist, 'assets')) ? 'public, max-age=31536000, immutable' : 'no-cache');
        },
      });
    }

    // The pages hold buttons that revoke keys and spend money: no other site may frame them.
    const sendPage = (reply: FastifyReply) =>
      reply
        .code(200)
        .headers({
          'Cache-Control': 'no-cache',
          'X-Frame-Options': 'DENY',
          'Content-Security-Policy': "frame-ancestors 'none'",
          'X-Content-Type-Options': 'nosniff',
        })
        .type('text/html; charset=utf-8')
        .send(page);

    app.get('/', { schema: { hide: true } }, async (_request, reply) => sendPage(reply));
    app.htmlFallback = (request, reply) => (isPageRequest(request) ? sendPage(reply) : null);
  },
  { name: 'dashboard', dependencies: ['deps'] },
);
