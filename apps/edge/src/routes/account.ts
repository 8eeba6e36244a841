import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { toDollars } from '#contracts/money';
import { cancelSession } from '#core/cookbooks';
import { accountOverview, claimAccountEmail, deleteOwnedAccount, ownerEmailState } from '#core/identity';
import { enqueueEmail } from '#core/notifications';
import { notFound, PlatformError } from '#core/platform';
import { clearSessionCookies } from '../http/dashboard-session.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

const TAGS = ['accounts'];

const accountView = z.object({
  id: z.string(),
  email: z.string().describe("The owner's sign-in address"),
  emailVerified: z.boolean().describe('Whether the owner opened a link mailed to the address'),
  emailVerifiedAt: z.string().nullable().describe('ISO 8601; null while unverified'),
  pendingEmail: z.string().nullable().describe('The address the owner is changing to, until it confirms; null when no change waits'),
  verificationRequired: z
    .boolean()
    .describe('Whether this installation limits unverified accounts (no adding funds, no inviting approvers until verified)'),
  balance: z.number().describe('Dollars'),
  createdAt: z.string().describe('ISO 8601'),
});

/**
 * The account itself (an addition to the specification): who owns it and whether the address is
 * verified, a new verification e-mail, and deleting it.
 */
const accountRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings, temporal } = app.deps;

  app.get(
    '/account',
    {
      config: { auth: 'key' },
      schema: {
        tags: TAGS,
        summary: 'The account of the credential: its address, whether the address is verified, its balance',
        description:
          'Any credential of the account (API key, agent key, the owner’s dashboard session). While `emailVerified` is false and `verificationRequired` is true, adding funds and inviting approvers answer 403 `email_unverified`; everything else works, including spending the sign-up credit.',
        response: { 200: z.object({ ok: z.literal(true), account: accountView }), ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { account, owner } = await accountOverview(sql, auth.accountId);
      return {
        ok: true as const,
        account: {
          id: account.id,
          email: account.email,
          emailVerified: owner?.email_verified_at != null,
          emailVerifiedAt: owner?.email_verified_at?.toISOString() ?? null,
          pendingEmail: owner?.pending_email ?? null,
          verificationRequired: settings.EMAIL_VERIFICATION === 'required',
          balance: toDollars(account.balance_micros),
          createdAt: account.created_at.toISOString(),
        },
      };
    },
  );

  app.post(
    '/account/verification-email',
    {
      config: { auth: 'account' },
      schema: {
        tags: TAGS,
        summary: 'Send the verification e-mail again (a new link; earlier links stop working)',
        description:
          'To the owner’s address. 409 `conflict` when it is verified already; 404 for an account no person owns (made for keys only), which has no address to verify. At most ACCOUNT_EMAILS_PER_PERSON_PER_HOUR (default 5) verification and address-change e-mails per person and hour: past that, 429 with Retry-After. The link works once, for EMAIL_VERIFY_TTL_HOURS (default 48).',
        body: z.object({}).strict().nullish(),
        response: {
          202: z.object({ ok: z.literal(true), email: z.string().describe('Where the link goes'), message: z.string() }),
          ...errorResponses(400, 401, 403, 404, 409, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const owner = await ownerEmailState(sql, auth.accountId);
      if (!owner) throw notFound('The account’s owner', 'This account has no owner who signs in, so there is no address to verify.');
      if (owner.email_verified_at) {
        throw new PlatformError('conflict', 'The address is verified already', {
          hint: 'Nothing to do: the account may add funds and invite approvers.',
        });
      }
      await claimAccountEmail(redis, settings.REDIS_PREFIX, owner.id, settings.ACCOUNT_EMAILS_PER_PERSON_PER_HOUR);
      await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'email-verify', personId: owner.id });
      request.log.info({ personId: owner.id }, 'verification e-mail queued');
      return reply.code(202).send({
        ok: true as const,
        email: owner.email,
        message: `A new verification link is on its way to ${owner.email}. Only the newest link works.`,
      });
    },
  );

  app.delete(
    '/account',
    {
      config: { auth: 'account' },
      schema: {
        tags: TAGS,
        summary: 'Delete the account and its owner’s login (dashboard session of the owner only; needs the password)',
        description:
          'Permanent. The owner’s dashboard session only (400 for a key: deleting needs the person and their password; 401 `invalid_credentials` when it is wrong). ' +
          'A balance left to spend is given up, not paid back: while there is one, the call is 409 `balance_remaining` (naming it) unless `forfeitBalance` is true. ' +
          'Every key is revoked, every dashboard session in the account ends, its approvers are removed, cookbook sessions that have not ended are cancelled, connections (stored keys and OAuth grants), webhook endpoints and e-mail choices are deleted, and the address is erased. ' +
          'The owner’s login ends too, with any approver memberships it has in other accounts. The ledger (payments and charges) is kept under the account id, without the address, as bookkeeping law requires (docs/SECURITY.md). The former address gets a last e-mail saying so.',
        body: z
          .object({
            password: z.string().min(1).max(1000),
            forfeitBalance: z.boolean().optional().describe('Confirms giving up the balance left (default false)'),
          })
          .strict(),
        response: {
          200: z.object({
            ok: z.literal(true),
            deleted: z.object({
              accountId: z.string(),
              forfeited: z.number().describe('Dollars given up'),
              keysRevoked: z.number().int(),
              dashboardSessionsEnded: z.number().int(),
              cookbookSessionsCancelled: z.number().int(),
              cookbookSessionsNotCancelled: z
                .number()
                .int()
                .describe(
                  'Sessions the workflow service could not cancel now; they can no longer be driven (the keys are revoked) and end at their expiry',
                ),
            }),
          }),
          ...errorResponses(400, 401, 403, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const session = request.dashboardSession;
      if (auth.via !== 'cookie' || !session?.personId) {
        throw new PlatformError('validation_failed', 'An account is deleted from its owner’s dashboard session', {
          hint: 'Sign in to the dashboard as the owner and delete it on the Settings page; a key cannot delete the account it belongs to.',
        });
      }
      const formerEmail = (await accountOverview(sql, auth.accountId)).account.email;
      const deleted = await deleteOwnedAccount(sql, {
        personId: session.personId,
        accountId: auth.accountId,
        password: request.body.password,
        forfeitBalance: request.body.forfeitBalance ?? false,
      });
      for (const keyId of deleted.revokedKeyIds) app.keyVerifier.announce(keyId);
      let cancelled = 0;
      for (const row of deleted.unendedSessions) {
        try {
          await cancelSession(temporal, settings.TEMPORAL_UPDATE_TIMEOUT_MS, row, 'the account was deleted');
          cancelled += 1;
        } catch (error) {
          // Ended meanwhile, or the workflow service is away: the session cannot be driven any more.
          request.log.warn({ err: error, sessionId: row.id }, 'could not cancel a session of a deleted account');
        }
      }
      clearSessionCookies(reply, settings);
      const forfeited = toDollars(deleted.forfeitedMicros);
      await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'account-deleted', to: formerEmail, forfeited: forfeited.toFixed(2) }).catch(
        (error: unknown) => request.log.error({ err: error, accountId: deleted.accountId }, 'could not queue the account deletion e-mail'),
      );
      request.log.info({ accountId: deleted.accountId, keys: deleted.revokedKeyIds.length, cancelled }, 'account deleted');
      return {
        ok: true as const,
        deleted: {
          accountId: deleted.accountId,
          forfeited,
          keysRevoked: deleted.revokedKeyIds.length,
          dashboardSessionsEnded: deleted.dashboardSessionsEnded,
          cookbookSessionsCancelled: cancelled,
          cookbookSessionsNotCancelled: deleted.unendedSessions.length - cancelled,
        },
      };
    },
  );
};

export default accountRoutes;
