import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses } from './error-responses.js';
import { notFound, PlatformError } from '#core/platform';
import { castVote, myVote, removeVote, tally, targetExists, type VoteTarget } from '#db/votes';
import { requireAuth } from '../plugins/auth.js';

const target = {
  targetType: z.enum(['api', 'cookbook']),
  targetId: z.string().min(1).max(200),
};
const tallyBody = z.object({ up: z.number().int(), down: z.number().int(), score: z.number().int() });
const voteValue = z.union([z.literal(1), z.literal(-1)]);

async function requireTarget(app: Parameters<FastifyPluginAsyncZod>[0], targetType: VoteTarget, targetId: string) {
  if (!(await targetExists(app.deps.sql, targetType, targetId))) {
    throw notFound(`${targetType === 'api' ? 'API' : 'Cookbook'} ${targetId}`, targetType === 'api' ? 'GET /api/v1/apis lists API ids.' : 'GET /api/v1/cookbooks lists cookbook ids.');
  }
}

/** Votes: POST /vote casts or changes, DELETE /vote removes, GET /votes answers the tally. */
const voteRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql } = app.deps;

  app.post(
    '/vote',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['votes'],
        summary: 'Vote an API or cookbook up (1) or down (-1); voting again changes the vote',
        body: z.object({ ...target, value: voteValue }).strict(),
        response: {
          200: z.object({
            ok: z.literal(true),
            vote: z.object({ targetType: z.string(), targetId: z.string(), value: voteValue }),
            tally: tallyBody,
          }),
          ...errorResponses(404),
        },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const { targetType, targetId, value } = request.body;
      await requireTarget(app, targetType, targetId);
      await castVote(sql, accountId, targetType, targetId, value);
      return { ok: true as const, vote: { targetType, targetId, value }, tally: await tally(sql, targetType, targetId) };
    },
  );

  app.delete(
    '/vote',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['votes'],
        summary: 'Remove your vote (targetType and targetId in the query string or a JSON body)',
        querystring: z.object(target).partial(),
        body: z.object(target).partial().nullish(),
        response: { 200: z.object({ ok: z.literal(true), removed: voteValue.nullable(), tally: tallyBody }), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const parsed = z.object(target).safeParse({ ...request.body, ...request.query });
      if (!parsed.success) {
        throw new PlatformError('validation_failed', `Invalid vote target: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`, {
          hint: 'DELETE /api/v1/vote?targetType=api&targetId=<id> (or the same two fields in a JSON body).',
        });
      }
      const { targetType, targetId } = parsed.data;
      await requireTarget(app, targetType, targetId);
      const removed = await removeVote(sql, accountId, targetType, targetId);
      return { ok: true as const, removed, tally: await tally(sql, targetType, targetId) };
    },
  );

  app.get(
    '/votes',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['votes'],
        summary: 'Vote tally of an API or cookbook, with your own vote',
        querystring: z.object(target),
        response: {
          200: z.object({ ok: z.literal(true), targetType: z.string(), targetId: z.string(), up: z.number().int(), down: z.number().int(), score: z.number().int(), myVote: voteValue.nullable() }),
          ...errorResponses(404),
        },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const { targetType, targetId } = request.query;
      await requireTarget(app, targetType, targetId);
      const [counts, mine] = await Promise.all([tally(sql, targetType, targetId), myVote(sql, accountId, targetType, targetId)]);
      return { ok: true as const, targetType, targetId, ...counts, myVote: mine };
    },
  );
};

export default voteRoutes;
