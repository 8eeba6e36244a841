import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listDocSections as listDocs, readDocSection, searchDocSections as searchDocs } from '#core/directory';
import { toDollars } from '#contracts/money';
import { operation, restDoor } from '../http/operation.js';

/** GET /docs and the list_docs tool. */
export const listDocSections = operation({}, async (app) => {
  const rows = await listDocs(app.deps.sql);
  return {
    ok: true as const,
    docs: rows.map((r) => ({ id: r.id, slug: r.slug, title: r.title, summary: r.summary, price: toDollars(r.price_micros) })),
  };
});

/** GET /docs/search and the search_docs tool. */
export const searchDocSections = operation({ querystring: z.object({ q: z.string().max(200).optional() }) }, async (app, _door, { query }) => ({
  ok: true as const,
  results: await searchDocs(app.deps.sql, query.q),
}));

/** GET /docs/:slug and the get_doc tool: charged at the section's price. */
export const getDocSection = operation(
  { params: z.object({ slug: z.string().min(1).max(100).describe('The section slug, as list_docs and search_docs answer it') }) },
  async (app, door, { params }) => {
    const doc = await readDocSection(app.deps.sql, params.slug, door.charge);
    return { ok: true as const, doc: { id: doc.id, slug: doc.slug, title: doc.title, summary: doc.summary, content: doc.content } };
  },
);

/** Platform docs: list and search are free; a section costs its price ($0.005 unless free). */
const docsRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/docs',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['docs'],
        summary: 'List documentation sections with their price',
        response: {
          200: z.object({
            ok: z.literal(true),
            docs: z.array(z.object({ id: z.string(), slug: z.string(), title: z.string(), summary: z.string(), price: z.number() })),
          }),
        },
      },
    },
    async (request, reply) => listDocSections.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/docs/search',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['docs'],
        summary: 'Search the docs; answers titles with highlighted snippets (<mark>...</mark>)',
        querystring: searchDocSections.schemas.querystring,
        response: {
          200: z.object({ ok: z.literal(true), results: z.array(z.object({ slug: z.string(), title: z.string(), snippet: z.string() })) }),
        },
      },
    },
    async (request, reply) => searchDocSections.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/docs/:slug',
    {
      // Priced: no implicit HEAD route, which would charge for a response without a body.
      exposeHeadRoute: false,
      config: { auth: 'key', priced: true },
      schema: {
        tags: ['docs'],
        summary: 'One documentation section in full ($0.005 unless the section is free)',
        params: getDocSection.schemas.params,
        response: {
          200: z.object({
            ok: z.literal(true),
            doc: z.object({ id: z.string(), slug: z.string(), title: z.string(), summary: z.string(), content: z.string() }),
          }),
        },
      },
    },
    async (request, reply) => getDocSection.run(app, restDoor(request, reply), request),
  );
};

export default docsRoutes;
