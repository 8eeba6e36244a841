import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponses } from './error-responses.js';
import { PlatformError } from '#core/platform';
import { voteOn, voteTally, withdrawVote } from '#core/directory';
import { requireAuth } from '../plugins/auth.js';

const target = {
  targetType: z.enum(['api', 'cookbook']),
  targetId: z.string().min(1).max(200),
};
const tallyBody = z.object({ up: z.number().int(), down: z.number().int(), score: z.number().int() });
const voteValue = z.union([z.literal(1), z.literal(-1)]);

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
      const counts = await voteOn(sql, accountId, { targetType, targetId }, value);
      return { ok: true as const, vote: { targetType, targetId, value }, tally: counts };
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
        throw new PlatformError(
          'validation_failed',
          `Invalid vote target: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`,
          {
            hint: 'DELETE /api/v1/vote?targetType=api&targetId=<id> (or the same two fields in a JSON body).',
          },
        );
      }
      return { ok: true as const, ...(await withdrawVote(sql, accountId, parsed.data)) };
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
          200: z.object({
            ok: z.literal(true),
            targetType: z.string(),
            targetId: z.string(),
            up: z.number().int(),
            down: z.number().int(),
            score: z.number().int(),
            myVote: voteValue.nullable(),
          }),
          ...errorResponses(404),
        },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const { targetType, targetId } = request.query;
      return { ok: true as const, targetType, targetId, ...(await voteTally(sql, accountId, { targetType, targetId })) };
    },
  );
};

export default voteRoutes;
