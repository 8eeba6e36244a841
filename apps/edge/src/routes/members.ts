import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { assertEmailVerified, claimInviteSend, inviteMember, listApprovers, memberView, removeApprover, requireApprover } from '#core/identity';
import { enqueueEmail } from '#core/notifications';
import { notFound, PlatformError } from '#core/platform';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';
import { emailSchema } from './register.js';

const memberSchema = z.object({
  id: z.string(),
  email: z.string(),
  role: z.literal('approver'),
  status: z.enum(['invited', 'active']).describe('invited: the e-mail is out and not accepted yet'),
  invitedAt: z.string(),
  acceptedAt: z.string().nullable(),
});
const memberParams = z.object({ memberId: z.string().min(1).max(100) });

/**
 * /members: people the account invites by e-mail as approvers. They sign in to the dashboard with
 * their own password and see and complete the account's human steps, nothing else. Managing them
 * needs an account credential (the owner's session or an API key; not an agent key, not an approver).
 */
const memberRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings } = app.deps;

  /** The invitation e-mail goes out from the worker, which mints the one-time link as it sends. */
  const sendInvite = (memberId: string) => enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'member-invite', memberId });
  /** Every invitation e-mail, first or resent, counts against the account's daily allowance. */
  const claimSend = (accountId: string) => claimInviteSend(redis, settings.REDIS_PREFIX, accountId, settings.INVITES_PER_ACCOUNT_PER_DAY);

  app.post(
    '/members',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['members'],
        summary: 'Invite a person by e-mail as an approver of this account',
        description:
          "The invitation e-mail carries a one-time link (valid INVITE_TTL_HOURS) where the person chooses a password, or, if the address already signs in, enters theirs: the account joins their login. The e-mail names no sender (the account's address is not verified). The answer is the same whether or not the address signs in anywhere; an invitation reserves the address in this account only. 409 when it is already invited to or an approver of this account, or is its own address; 429 past INVITES_PER_ACCOUNT_PER_DAY invitation e-mails (resends included).",
        body: z.object({ email: emailSchema, role: z.literal('approver').default('approver') }).strict(),
        response: { 201: z.object({ ok: z.literal(true), member: memberSchema }), ...errorResponses(400, 401, 403, 409, 429, 503) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      await assertEmailVerified(sql, settings, auth.accountId, 'invite approvers');
      await claimSend(auth.accountId);
      const member = await inviteMember(sql, { accountId: auth.accountId, email: request.body.email });
      try {
        await sendInvite(member.id);
      } catch (error) {
        // No e-mail on its way: take the invitation back, so the caller can simply try again.
        await removeApprover(sql, auth.accountId, member.id);
        throw new PlatformError('service_unavailable', 'The invitation could not be queued for sending', {
          hint: 'Try again in a moment.',
          headers: { 'retry-after': '5' },
          cause: error,
        });
      }
      request.log.info({ memberId: member.id }, 'approver invited');
      return reply.code(201).send({ ok: true as const, member: memberView(member) });
    },
  );

  app.get(
    '/members',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['members'],
        summary: "The account's approvers, invited and active",
        response: { 200: z.object({ ok: z.literal(true), members: z.array(memberSchema) }), ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => {
      const rows = await listApprovers(sql, requireAuth(request).accountId);
      return { ok: true as const, members: rows.map(memberView) };
    },
  );

  app.post(
    '/members/:memberId/resend-invite',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['members'],
        summary: 'Send the invitation again with a fresh link (the earlier link stops working); counts against INVITES_PER_ACCOUNT_PER_DAY',
        params: memberParams,
        response: { 200: z.object({ ok: z.literal(true), member: memberSchema }), ...errorResponses(401, 403, 404, 409, 429, 503) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const member = await requireApprover(sql, auth.accountId, request.params.memberId);
      if (member.accepted_at)
        throw new PlatformError('conflict', 'This approver has already accepted the invitation', {
          hint: 'They sign in with their e-mail and password.',
        });
      await assertEmailVerified(sql, settings, auth.accountId, 'invite approvers');
      await claimSend(auth.accountId);
      await sendInvite(member.id);
      return { ok: true as const, member: memberView(member) };
    },
  );

  app.delete(
    '/members/:memberId',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['members'],
        summary:
          'Remove an approver: their sessions end at once, an unused invitation stops working, their assigned steps go back to the first taker',
        params: memberParams,
        response: { 200: z.object({ ok: z.literal(true), removed: z.literal(true) }), ...errorResponses(401, 403, 404, 429) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      if (!(await removeApprover(sql, auth.accountId, request.params.memberId))) {
        throw notFound(`Approver ${request.params.memberId}`, 'List approvers with GET /api/v1/members.');
      }
      request.log.info({ memberId: request.params.memberId }, 'approver removed');
      return { ok: true as const, removed: true as const };
    },
  );
};

export default memberRoutes;
