import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { getDoc, listDocs, searchDocs } from '#db/docs';
import { notFound, PlatformError } from '#core/platform';
import { toDollars } from '#contracts/money';
import { chargeRequest } from '../http/charge.js';

/** Platform docs: list and search are free; a section costs its price ($0.005 unless free). */
const docsRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql } = app.deps;

  app.get(
    '/docs',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['docs'],
        summary: 'List documentation sections with their price',
        response: {
          200: z.object({ ok: z.literal(true), docs: z.array(z.object({ id: z.string(), slug: z.string(), title: z.string(), summary: z.string(), price: z.number() })) }),
        },
      },
    },
    async () => {
      const rows = await listDocs(sql);
      return { ok: true as const, docs: rows.map((r) => ({ id: r.id, slug: r.slug, title: r.title, summary: r.summary, price: toDollars(r.price_micros) })) };
    },
  );

  app.get(
    '/docs/search',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['docs'],
        summary: 'Search the docs; answers titles with highlighted snippets (<mark>...</mark>)',
        querystring: z.object({ q: z.string().max(200).optional() }),
        response: { 200: z.object({ ok: z.literal(true), results: z.array(z.object({ slug: z.string(), title: z.string(), snippet: z.string() })) }) },
      },
    },
    async (request) => {
      const q = request.query.q?.trim();
      if (!q || !/[\p{L}\p{N}]/u.test(q)) {
        throw new PlatformError('validation_failed', 'q is required', { hint: 'Search with a word or two: GET /api/v1/docs/search?q=rate+limits' });
      }
      return { ok: true as const, results: await searchDocs(sql, q) };
    },
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
        params: z.object({ slug: z.string().min(1).max(100) }),
        response: {
          200: z.object({ ok: z.literal(true), doc: z.object({ id: z.string(), slug: z.string(), title: z.string(), summary: z.string(), content: z.string() }) }),
        },
      },
    },
    async (request, reply) => {
      const doc = await getDoc(sql, request.params.slug);
      if (!doc) throw notFound(`Doc section ${request.params.slug}`, 'Nothing was charged. GET /api/v1/docs lists every section.');
      await chargeRequest(request, reply, { costMicros: doc.price_micros, item: 'doc', description: `doc ${doc.slug}` });
      return { ok: true as const, doc: { id: doc.id, slug: doc.slug, title: doc.title, summary: doc.summary, content: doc.content } };
    },
  );
};

export default docsRoutes;
