import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findAccountByEmail, getAccount } from '#db/accounts';
import { findSignInMember, getLiveMember } from '#db/members';
import { PlatformError } from '#core/platform';
import { acceptInvitation, PASSWORD_POLICY, verifyPassword } from '#core/identity';
import { closeDashboardSession, openDashboardSession, verifyDashboardSession } from '#core/identity';
import { assertCsrf, assertSameOrigin, clearSessionCookies, SESSION_COOKIE, setSessionCookies } from '../http/dashboard-session.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

const TAGS = ['dashboard session'];
const account = z.object({ id: z.string(), email: z.string() });
/** Who signed in: the account's owner, or one of its approvers (who sees and completes human steps only). */
const person = {
  role: z.enum(['owner', 'approver']),
  member: z.object({ id: z.string(), email: z.string() }).nullable().describe('The approver who signed in; null for the owner'),
};

/**
 * Dashboard sessions on the site root (/api/auth/...), outside the versioned API: login sets the
 * HttpOnly session cookie and the readable CSRF cookie; logout ends the session server-side and
 * clears both. Programs use API keys instead.
 */
const signedIn = z.object({
  ok: z.literal(true),
  account,
  ...person,
  csrfToken: z.string().describe('Also in the csrf_token cookie; echo it in X-CSRF-Token'),
  expiresAt: z.string().describe('ISO 8601'),
});

const sessionRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;

  /** Opens a dashboard session for the owner or an approver and sets its cookies; the sign-in answer. */
  async function signIn(reply: FastifyReply, owner: { id: string; email: string }, member: { id: string; email: string } | null) {
    const session = await openDashboardSession(sql, settings, owner.id, member?.id ?? null);
    setSessionCookies(reply, settings, session);
    return {
      ok: true as const,
      account: { id: owner.id, email: owner.email },
      role: member ? ('approver' as const) : ('owner' as const),
      member: member ? { id: member.id, email: member.email } : null,
      csrfToken: session.csrfToken,
      expiresAt: session.expiresAt.toISOString(),
    };
  }

  app.post(
    '/api/auth/login',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Log in to the dashboard: sets the session cookie (HttpOnly) and the csrf_token cookie',
        description:
          'A wrong password and an unknown email get the same 401 `invalid_credentials`. Browser calls that change state with the cookie must send the csrf_token back in X-CSRF-Token from the site origin.',
        body: z.object({ email: z.string().trim().min(1).max(254), password: z.string().min(1).max(1000) }).strict(),
        response: {
          200: signedIn,
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request, reply) => {
      // A login form posted from another site must not log the browser into an attacker's account.
      assertSameOrigin(request, settings, { required: false });
      // Besides the per-address limit of the route, guesses at one account are limited from everywhere.
      const emailDigest = createHash('sha256').update(request.body.email.toLowerCase()).digest('base64url');
      await app.rateLimiter.consume(request, reply, 'login', `email:${emailDigest}`);
      // An address is an account's owner or an approver of one, never both (registration and
      // invitations keep it so).
      const owner = await findAccountByEmail(sql, request.body.email);
      const member = owner ? null : await findSignInMember(sql, request.body.email);
      const passwordOk = await verifyPassword(request.body.password, owner?.password_hash ?? member?.password_hash ?? null);
      const memberAccount = member && passwordOk ? await getAccount(sql, member.account_id) : null;
      if (!passwordOk || !(owner ?? memberAccount)) {
        throw new PlatformError('invalid_credentials', 'Email or password is wrong', { hint: 'Check both and try again; register with POST /api/v1/register.' });
      }
      return signIn(reply, (owner ?? memberAccount)!, member);
    },
  );

  app.post(
    '/api/auth/accept-invite',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: "Accept an approver invitation: choose a password and sign in (sets the session cookies, as login does)",
        description: `The token is the one in the invitation e-mail's link (after #token=). It works once and expires; a spent, expired or replaced token is 400. ${PASSWORD_POLICY}`,
        body: z.object({ token: z.string().min(20).max(200), password: z.string().max(1000).describe(PASSWORD_POLICY) }).strict(),
        response: { 200: signedIn, ...errorResponses(400, 403, 429) },
      },
    },
    async (request, reply) => {
      assertSameOrigin(request, settings, { required: false });
      const { token, password } = request.body;
      const member = await acceptInvitation(sql, token, password);
      const owner = await getAccount(sql, member.account_id);
      if (!owner) throw new PlatformError('validation_failed', 'The account that invited you no longer exists');
      request.log.info({ memberId: member.id }, 'approver accepted the invitation');
      return signIn(reply, owner, member);
    },
  );

  app.post(
    '/api/auth/logout',
    {
      schema: {
        tags: TAGS,
        summary: 'Log out: ends the session (the token stops working at once) and clears the cookies',
        description: 'With a live session, the same CSRF rules as other cookie-authenticated changes apply. Without one it only clears the cookies.',
        response: { 200: z.object({ ok: z.literal(true), loggedOut: z.boolean().describe('false when there was no live session') }), ...errorResponses(403) },
      },
    },
    async (request, reply) => {
      const token = request.cookies[SESSION_COOKIE];
      let loggedOut = false;
      if (token) {
        const session = await verifyDashboardSession(sql, settings, token).catch(() => null);
        if (session) {
          assertCsrf(request, settings, session);
          loggedOut = await closeDashboardSession(sql, session.sessionId);
        }
      }
      clearSessionCookies(reply, settings);
      return { ok: true as const, loggedOut };
    },
  );

  app.get(
    '/api/auth/session',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Who is logged in: the account of the current credential (cookie, API key or agent key), and whether it is its owner or an approver',
        response: {
          200: z.object({
            ok: z.literal(true),
            account,
            ...person,
            via: z.enum(['key', 'cookie']),
            keyKind: z.enum(['api', 'agent']).nullable().describe('null for the session cookie'),
          }),
          ...errorResponses(401, 403, 429),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const row = await getAccount(sql, auth.accountId);
      if (!row) throw new PlatformError('invalid_session', 'Account no longer exists');
      const member = auth.memberId === null ? null : await getLiveMember(sql, auth.memberId);
      if (auth.memberId !== null && !member) throw new PlatformError('invalid_session', 'This approver has been removed');
      return {
        ok: true as const,
        account: { id: row.id, email: row.email },
        role: auth.role,
        member: member ? { id: member.id, email: member.email } : null,
        via: auth.via,
        keyKind: auth.keyKind,
      };
    },
  );
};

export default sessionRoutes;
