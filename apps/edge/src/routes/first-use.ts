import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CHECKLIST_ITEMS, firstUseChecklist, markChecklist, type FirstUseChecklist } from '#core/identity';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

const checklistAnswer = z.object({
  ok: z.literal(true),
  items: z
    .array(z.object({ id: z.enum(CHECKLIST_ITEMS), done: z.boolean() }))
    .describe(
      'copy_key: a key was copied from the dashboard or used; discover: an API was searched, discovered or looked up; first_call: a paid call went through the proxy; add_funds: funds were added',
    ),
  done: z.boolean().describe('Every item done; stays true once reached'),
  dismissed: z.boolean().describe('The owner closed the checklist'),
});
const answer = (checklist: FirstUseChecklist) => ({ ok: true as const, ...checklist });

/**
 * The dashboard's first-run checklist (GET /me/checklist), worked out from the account's own state,
 * and the two moments only the dashboard sees (POST /me/checklist): the key copied, the checklist closed.
 */
const firstUseRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql } = app.deps;

  app.get(
    '/me/checklist',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['account'],
        summary: "The first-run checklist: copy the key, discover an API, make a first call, add funds, each from the account's state",
        response: { 200: checklistAnswer, ...errorResponses(401, 403) },
      },
    },
    async (request) => answer(await firstUseChecklist(sql, requireAuth(request).accountId)),
  );

  app.post(
    '/me/checklist',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['account'],
        summary: 'Record a checklist moment: key_copied (the key or a command holding it was copied) or dismissed (close the checklist)',
        body: z.object({ mark: z.enum(['key_copied', 'dismissed'], { message: 'mark must be key_copied or dismissed' }) }).strict(),
        response: { 200: checklistAnswer, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => answer(await markChecklist(sql, requireAuth(request).accountId, request.body.mark)),
  );
};

export default firstUseRoutes;
