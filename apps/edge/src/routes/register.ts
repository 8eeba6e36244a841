import { signupCreditMicros } from '#core/billing';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { toDollars } from '#contracts/money';
import { registerAccount } from '#core/identity';
import { assertPasswordPolicy, PASSWORD_POLICY } from '#core/identity';
import { errorResponses } from './error-responses.js';
import { fullKeySchema, toKeyMeta } from './keys.js';
import { keyMeta } from '#contracts/keys';

export const emailSchema = z
  .string()
  .trim()
  .max(254, 'must be at most 254 characters')
  .pipe(z.email({ error: 'must be a valid email address' }));

/** POST /register: a new account, its first API key (shown once) and the sign-up credit. */
const registerRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;

  app.post(
    '/register',
    {
      config: { rateLimit: 'register' },
      schema: {
        tags: ['accounts'],
        summary: 'Create an account; answers its first API key (shown once) and the opening balance',
        description: `${PASSWORD_POLICY} An email that already has an account (in any letter case) is 409; a pending invitation to it is not in the way. An address that already signs in as an approver registers with the password it signs in with.`,
        body: z.object({ email: emailSchema, password: z.string().max(1000).describe(PASSWORD_POLICY) }).strict(),
        response: {
          201: z.object({
            ok: z.literal(true),
            account: z.object({ id: z.string(), email: z.string() }),
            key: keyMeta,
            fullKey: fullKeySchema,
            balance: z.number().describe('Dollars: the sign-up credit'),
          }),
          ...errorResponses(400, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body;
      assertPasswordPolicy(password, email);
      const registered = await registerAccount(sql, { email, password, signupCreditMicros: signupCreditMicros(settings) });
      if (!registered) {
        throw new PlatformError('conflict', 'An account with this email already exists', {
          hint: 'Log in with POST /api/auth/login, or register another email. If you sign in with this address as an approver, register with the password you sign in with.',
        });
      }
      return reply.code(201).send({
        ok: true as const,
        account: { id: registered.account.id, email: registered.account.email },
        key: toKeyMeta(registered.key),
        fullKey: registered.fullKey,
        balance: toDollars(registered.balanceMicros),
      });
    },
  );
};

export default registerRoutes;
