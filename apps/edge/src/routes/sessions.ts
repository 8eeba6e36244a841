import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findAccountByEmail, getAccount } from '#db/accounts';
import { PlatformError } from '#core/platform';
import { verifyPassword } from '#core/identity';
import { closeDashboardSession, openDashboardSession, verifyDashboardSession } from '#core/identity';
import { assertCsrf, assertSameOrigin, clearSessionCookies, SESSION_COOKIE, setSessionCookies } from '../http/dashboard-session.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

const TAGS = ['dashboard session'];
const account = z.object({ id: z.string(), email: z.string() });

/**
 * Dashboard sessions on the site root (/api/auth/...), outside the versioned API: login sets the
 * HttpOnly session cookie and the readable CSRF cookie; logout ends the session server-side and
 * clears both. Programs use API keys instead.
 */
const sessionRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;

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
          200: z.object({
            ok: z.literal(true),
            account,
            csrfToken: z.string().describe('Also in the csrf_token cookie; echo it in X-CSRF-Token'),
            expiresAt: z.string().describe('ISO 8601'),
          }),
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
      const found = await findAccountByEmail(sql, request.body.email);
      const passwordOk = await verifyPassword(request.body.password, found?.password_hash ?? null);
      if (!found || !passwordOk) {
        throw new PlatformError('invalid_credentials', 'Email or password is wrong', { hint: 'Check both and try again; register with POST /api/v1/register.' });
      }
      const session = await openDashboardSession(sql, settings, found.id);
      setSessionCookies(reply, settings, session);
      return { ok: true as const, account: { id: found.id, email: found.email }, csrfToken: session.csrfToken, expiresAt: session.expiresAt.toISOString() };
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
      config: { auth: 'key' },
      schema: {
        tags: TAGS,
        summary: 'Who is logged in: the account of the current credential (cookie, API key or agent key)',
        response: {
          200: z.object({
            ok: z.literal(true),
            account,
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
      return { ok: true as const, account: { id: row.id, email: row.email }, via: auth.via, keyKind: auth.keyKind };
    },
  );
};

export default sessionRoutes;
