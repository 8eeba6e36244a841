import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { notFound, PlatformError } from '#core/platform';
import { enqueueEmail } from '#core/notifications';
import {
  cancelEmailChange,
  changePassword,
  claimAccountEmail,
  claimPasswordResetSend,
  confirmEmailChange,
  personEmailState,
  requestEmailChange,
  verifyEmail,
  listPersonSessions,
  PASSWORD_POLICY,
  personIdByEmail,
  resetPassword,
  signOutPerson,
  type DashboardSession,
} from '#core/identity';
import { assertSameOrigin, clearSessionCookies } from '../http/dashboard-session.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';
import { emailSchema } from './register.js';

const TAGS = ['dashboard session'];

const RESET_ANSWER =
  'If this address signs in to Service, an e-mail with a link to choose a new password is on its way. The link works once and for a limited time; only the newest one works.';

/**
 * A person's own login, on the site root beside the sign-in routes: password reset by e-mail (signed
 * out), and for a signed-in person, changing the password and their sessions. Cookie sessions only:
 * a key belongs to an account, not to a person.
 */
const accountSecurityRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings } = app.deps;

  /** The signed-in person's session, or 400 for a key (which has no person). */
  function personSession(request: Parameters<typeof requireAuth>[0]): DashboardSession & { personId: string } {
    requireAuth(request);
    const session = request.dashboardSession;
    if (!session || session.personId === null) {
      throw new PlatformError('validation_failed', 'Only a person signed in to the dashboard can do this', {
        hint: 'Sign in to the dashboard with your e-mail and password; an API key belongs to an account, not to a person.',
      });
    }
    return { ...session, personId: session.personId };
  }

  app.post(
    '/api/auth/password-reset',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Ask for a password reset link by e-mail',
        description: `Always 202 with the same answer, whether or not the address signs in anywhere (no account enumeration). When it does, its person gets an e-mail with a one-time link to /reset-password (valid PASSWORD_RESET_TTL_MINUTES, default 60; a newer request replaces it). At most PASSWORD_RESETS_PER_ADDRESS_PER_HOUR e-mails per address; requests past that are answered alike and send nothing. Rate limited per client address with sign-in (RATE_LIMIT_LOGIN_*).`,
        body: z.object({ email: emailSchema }).strict(),
        response: {
          202: z.object({ ok: z.literal(true), message: z.string() }),
          ...errorResponses(400, 403, 429, 503),
        },
      },
    },
    async (request, reply) => {
      assertSameOrigin(request, settings, { required: false });
      const email = request.body.email;
      const addressDigest = createHash('sha256').update(email.toLowerCase()).digest('base64url');
      // Counted for every address, known or not, so the allowance says nothing about accounts.
      const allowed = await claimPasswordResetSend(redis, settings.REDIS_PREFIX, addressDigest, settings.PASSWORD_RESETS_PER_ADDRESS_PER_HOUR);
      const personId = await personIdByEmail(sql, email);
      if (allowed && personId) {
        // Not awaited: queueing takes a Redis round trip that an unknown address would not, and the
        // answer's timing must not tell the two apart. A failure is logged, never answered.
        enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'password-reset', personId })
          .then(() => request.log.info({ personId }, 'password reset e-mail queued'))
          .catch((error: unknown) => request.log.error({ err: error, personId }, 'could not queue the password reset e-mail'));
      }
      return reply.code(202).send({ ok: true as const, message: RESET_ANSWER });
    },
  );

  app.post(
    '/api/auth/password-reset/confirm',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Set a new password with the token from a reset e-mail; signs the person out of every dashboard session',
        description: `The token is the one in the e-mail's link (after #token=). It works once, until it expires, and only if no newer link replaced it: otherwise 400. ${PASSWORD_POLICY} A password that breaks the policy is 400 and the link still works. Every dashboard session of the person ends; API keys keep working. Sign in afterwards with POST /api/auth/login.`,
        body: z.object({ token: z.string().min(20).max(200), password: z.string().max(1000).describe(PASSWORD_POLICY) }).strict(),
        response: {
          200: z.object({
            ok: z.literal(true),
            email: z.string().describe('The address that signs in with the new password'),
            sessionsEnded: z.number().int().describe('Dashboard sessions signed out'),
          }),
          ...errorResponses(400, 403, 429),
        },
      },
    },
    async (request, reply) => {
      assertSameOrigin(request, settings, { required: false });
      const { person, sessionsEnded } = await resetPassword(sql, request.body.token, request.body.password);
      request.log.info({ personId: person.id, sessionsEnded }, 'password reset by e-mail link');
      // This browser's own cookie (if any) belonged to a session that just ended.
      clearSessionCookies(reply, settings);
      return { ok: true as const, email: person.email, sessionsEnded };
    },
  );

  app.post(
    '/api/auth/password',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Change the signed-in person’s password; signs out their other dashboard sessions',
        description: `Cookie sessions only. The current password must be right (401 \`invalid_credentials\`); the new one follows the policy (${PASSWORD_POLICY}) and differs from the current one (400). Every other dashboard session of the person ends; this one stays signed in. A pending reset link stops working.`,
        body: z.object({ currentPassword: z.string().min(1).max(1000), newPassword: z.string().max(1000).describe(PASSWORD_POLICY) }).strict(),
        response: {
          200: z.object({ ok: z.literal(true), sessionsEnded: z.number().int().describe('Other dashboard sessions signed out') }),
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const session = personSession(request);
      const { sessionsEnded } = await changePassword(sql, {
        personId: session.personId,
        currentPassword: request.body.currentPassword,
        newPassword: request.body.newPassword,
        keepSessionId: session.sessionId,
      });
      request.log.info({ personId: session.personId, sessionsEnded }, 'password changed');
      return { ok: true as const, sessionsEnded };
    },
  );

  app.post(
    '/api/auth/verify-email',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Verify an address with the token from a verification e-mail',
        description:
          'The token is the one in the e-mail’s link (after #token=). No sign-in needed: the link may be opened on another device. It works once, until it expires (EMAIL_VERIFY_TTL_HOURS, default 48), and only if no newer link replaced it: otherwise 400. Once verified, the person’s account may add funds and invite approvers.',
        body: z.object({ token: z.string().min(20).max(200) }).strict(),
        response: {
          200: z.object({ ok: z.literal(true), email: z.string().describe('The address now verified') }),
          ...errorResponses(400, 403, 429),
        },
      },
    },
    async (request) => {
      assertSameOrigin(request, settings, { required: false });
      const person = await verifyEmail(sql, request.body.token);
      request.log.info({ personId: person.id }, 'e-mail address verified');
      return { ok: true as const, email: person.email };
    },
  );

  const emailState = z.object({
    ok: z.literal(true),
    email: z.string().describe('The address the person signs in with now'),
    emailVerified: z.boolean(),
    pendingEmail: z.string().nullable().describe('The address waiting for its confirmation link to be opened; null when none'),
  });

  app.get(
    '/api/auth/email',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'The signed-in person’s address: whether it is verified, and any change waiting for confirmation',
        description: 'Cookie sessions only (400 for a key). Approvers too: the address is their login’s.',
        response: { 200: emailState, ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const session = personSession(request);
      const state = await personEmailState(sql, session.personId);
      return { ok: true as const, email: state.email, emailVerified: state.email_verified_at !== null, pendingEmail: state.pending_email };
    },
  );

  app.post(
    '/api/auth/email-change',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Ask to change the signed-in person’s address: a confirmation link goes to the new address',
        description:
          'Cookie sessions only. The password must be right (401 `invalid_credentials`). An address another login or account uses is 409 `email_taken`. Nothing changes until the link mailed to the new address is opened (POST /api/auth/email-change/confirm); the old address keeps working until then and is told once the change is made. Asking again replaces the pending change and its link. Counts against ACCOUNT_EMAILS_PER_PERSON_PER_HOUR (429 past it).',
        body: z.object({ newEmail: emailSchema, password: z.string().min(1).max(1000) }).strict(),
        response: {
          202: z.object({ ok: z.literal(true), pendingEmail: z.string(), message: z.string() }),
          ...errorResponses(400, 401, 403, 409, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const session = personSession(request);
      const { pendingEmail } = await requestEmailChange(sql, {
        personId: session.personId,
        password: request.body.password,
        newEmail: request.body.newEmail,
      });
      await claimAccountEmail(redis, settings.REDIS_PREFIX, session.personId, settings.ACCOUNT_EMAILS_PER_PERSON_PER_HOUR);
      await enqueueEmail(redis, settings.REDIS_PREFIX, { kind: 'email-change', personId: session.personId });
      request.log.info({ personId: session.personId }, 'e-mail change asked for; confirmation link queued');
      return reply.code(202).send({
        ok: true as const,
        pendingEmail,
        message: `Open the link we sent to ${pendingEmail} to finish the change. Until then you sign in with your current address.`,
      });
    },
  );

  app.delete(
    '/api/auth/email-change',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Cancel the pending address change; its confirmation link stops working',
        description: 'Cookie sessions only. 404 when no change is pending.',
        response: { 200: z.object({ ok: z.literal(true), cancelled: z.literal(true) }), ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const session = personSession(request);
      if (!(await cancelEmailChange(sql, session.personId))) throw notFound('A pending address change', 'Nothing to cancel.');
      return { ok: true as const, cancelled: true as const };
    },
  );

  app.post(
    '/api/auth/email-change/confirm',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Confirm an address change with the token from the e-mail sent to the new address',
        description:
          'No sign-in needed (the link may be opened on another device). The token works once, until it expires (EMAIL_VERIFY_TTL_HOURS), and only for the newest pending change: otherwise 400. From then on the person signs in with the new address (verified), the account they own and their approver memberships carry it, and the old address gets an e-mail saying so. Dashboard sessions stay signed in. 409 `email_taken` when someone took the address meanwhile.',
        body: z.object({ token: z.string().min(20).max(200) }).strict(),
        response: {
          200: z.object({ ok: z.literal(true), email: z.string().describe('The new sign-in address'), previousEmail: z.string() }),
          ...errorResponses(400, 403, 409, 429),
        },
      },
    },
    async (request) => {
      assertSameOrigin(request, settings, { required: false });
      const changed = await confirmEmailChange(sql, request.body.token);
      request.log.info({ personId: changed.personId }, 'e-mail address changed');
      await enqueueEmail(redis, settings.REDIS_PREFIX, {
        kind: 'email-changed',
        personId: changed.personId,
        previousEmail: changed.previousEmail,
      }).catch((error: unknown) => request.log.error({ err: error, personId: changed.personId }, 'could not queue the address-changed notice'));
      return { ok: true as const, email: changed.email, previousEmail: changed.previousEmail };
    },
  );

  const sessionView = z.object({
    id: z.string(),
    account: z.object({ id: z.string(), email: z.string() }).describe('The account the session works in'),
    role: z.enum(['owner', 'approver']),
    userAgent: z.string().nullable().describe("The browser's User-Agent when it signed in; null for older sessions"),
    createdAt: z.string().describe('ISO 8601'),
    expiresAt: z.string().describe('ISO 8601'),
    current: z.boolean().describe('The session of this request'),
  });

  app.get(
    '/api/auth/sessions',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'The signed-in person’s live dashboard sessions, in every account they belong to, newest first',
        description: 'Cookie sessions only (400 for a key). At most 200.',
        response: { 200: z.object({ ok: z.literal(true), sessions: z.array(sessionView) }), ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const session = personSession(request);
      const rows = await listPersonSessions(sql, session.personId);
      return {
        ok: true as const,
        sessions: rows.map((row) => ({
          id: row.id,
          account: { id: row.account_id, email: row.account_email },
          role: row.member_id === null ? ('owner' as const) : ('approver' as const),
          userAgent: row.user_agent,
          createdAt: row.created_at.toISOString(),
          expiresAt: row.expires_at.toISOString(),
          current: row.id === session.sessionId,
        })),
      };
    },
  );

  app.post(
    '/api/auth/sessions/revoke-all',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Sign out everywhere: end the signed-in person’s other dashboard sessions, or all of them with includeCurrent',
        description:
          'Cookie sessions only. By default this session stays signed in; `includeCurrent: true` ends it too and clears its cookies. API keys are not affected: revoke those on the Keys page.',
        // The body is optional: without one, this session stays signed in.
        body: z
          .object({ includeCurrent: z.boolean().optional().describe('Also end the session of this request (default false)') })
          .strict()
          .nullish(),
        response: {
          200: z.object({ ok: z.literal(true), sessionsEnded: z.number().int(), signedOut: z.boolean().describe('Whether this session ended too') }),
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request, reply) => {
      const session = personSession(request);
      const includeCurrent = request.body?.includeCurrent ?? false;
      const sessionsEnded = await signOutPerson(sql, session.personId, includeCurrent ? null : session.sessionId);
      if (includeCurrent) clearSessionCookies(reply, settings);
      request.log.info({ personId: session.personId, sessionsEnded }, 'signed out everywhere');
      return { ok: true as const, sessionsEnded, signedOut: includeCurrent };
    },
  );
};

export default accountSecurityRoutes;
