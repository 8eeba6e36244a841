import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { z } from 'zod';
import type { AuthRequirement } from './auth.js';

/** What the edge knows about one route: its zod schemas and who may call it. */
export interface CatalogedRoute {
  params?: z.ZodType;
  querystring?: z.ZodType;
  body?: z.ZodType;
  response?: Record<string, z.ZodType>;
  summary?: string;
  description?: string;
  auth: AuthRequirement;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered after this plugin, by `METHOD /full/url/:param` (the MCP tools read it). */
    routeCatalog: ReadonlyMap<string, CatalogedRoute>;
  }
}

/**
 * Records each route's zod schemas and auth requirement as it is registered, so that other
 * surfaces (the MCP tools) describe and call the routes with the very schemas the routes validate
 * with, instead of a second copy of them.
 */
export default fp(
  async function routeCatalogPlugin(app: FastifyInstance) {
    const catalog = new Map<string, CatalogedRoute>();
    app.decorate('routeCatalog', catalog);
    app.addHook('onRoute', (route) => {
      const schema = (route.schema ?? {}) as Omit<CatalogedRoute, 'auth'>;
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        catalog.set(`${method} ${route.url}`, {
          params: schema.params,
          querystring: schema.querystring,
          body: schema.body,
          response: schema.response,
          summary: schema.summary,
          description: schema.description,
          auth: (route.config as { auth?: AuthRequirement } | undefined)?.auth ?? 'none',
        });
      }
    });
  },
  { name: 'route-catalog' },
);
