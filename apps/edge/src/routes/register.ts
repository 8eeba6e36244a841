import { signupCreditMicros } from '#core/billing';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { toDollars } from '#contracts/money';
import { ownerEmailState, registerAccount } from '#core/identity';
import { enqueueEmail } from '#core/notifications';
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
  const { sql, redis, settings } = app.deps;

  app.post(
    '/register',
    {
      config: { rateLimit: 'register' },
      schema: {
        tags: ['accounts'],
        summary: 'Create an account; answers its first API key (shown once) and the opening balance',
        description: `${PASSWORD_POLICY} A verification e-mail goes to the address: until its link is opened the account can do everything free and spend its sign-up credit, but not add funds or invite approvers (GET /api/v1/account shows the state). An email that already has an account (in any letter case) is 409; a pending invitation to it is not in the way. An address that already signs in as an approver registers with the password it signs in with.`,
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
      // A new login is asked to verify its address (an approver's login that registers an account has
      // opened an invitation at this address already). Where the operator turned verification off,
      // nobody is mailed unasked; the Settings page still offers the link.
      const owner = settings.EMAIL_VERIFICATION === 'required' ? await ownerEmailState(sql, registered.account.id) : null;
      if (owner && !owner.email_verified_at) {
        await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'email-verify', personId: owner.id }).catch((error: unknown) =>
          request.log.error({ err: error, personId: owner.id }, 'could not queue the verification e-mail; the person can ask again'),
        );
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
