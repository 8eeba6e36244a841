import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isOperatorPerson, operatorEmails } from '#core/identity';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

/**
 * GET /me/operator-tools: whether the person signed in to the dashboard is one of the operator's
 * (OPERATOR_EMAILS), and the addresses of the operator's tools they may open. Everyone else, and
 * every key, gets operator false and no addresses.
 */
const operatorToolRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;
  const operators = operatorEmails(settings.OPERATOR_EMAILS);

  app.get(
    '/me/operator-tools',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: ['account'],
        summary: "Whether the dashboard's person is an operator (OPERATOR_EMAILS), with the operator tools' addresses",
        response: {
          200: z.object({
            ok: z.literal(true),
            operator: z.boolean(),
            temporalUiUrl: z.string().nullable().describe("The Temporal UI's address, for operators only"),
          }),
          ...errorResponses(401),
        },
      },
    },
    async (request) => {
      const operator = await isOperatorPerson(sql, requireAuth(request), operators);
      return { ok: true as const, operator, temporalUiUrl: operator ? settings.TEMPORAL_UI_URL.replace(/\/+$/, '') : null };
    },
  );
};

export default operatorToolRoutes;
