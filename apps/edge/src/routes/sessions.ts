import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { notFound, PlatformError } from '#core/platform';
import { enqueueEmail } from '#core/notifications';
import {
  acceptInvitation,
  authenticatePerson,
  callerIdentity,
  listMemberships,
  LoginThrottle,
  personIdByEmail,
  PASSWORD_POLICY,
  type MembershipRow,
} from '#core/identity';
import { closeDashboardSession, openDashboardSession, verifyDashboardSession } from '#core/identity';
import { assertCsrf, assertSameOrigin, clearSessionCookies, SESSION_COOKIE, setSessionCookies } from '../http/dashboard-session.js';
import { clientAddress } from '../plugins/rate-limit.js';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

const TAGS = ['dashboard session'];
const account = z.object({ id: z.string(), email: z.string() });
/** Who signed in: the account's owner, or one of its approvers (who sees and completes human steps only). */
const person = {
  role: z.enum(['owner', 'approver']),
  member: z.object({ id: z.string(), email: z.string() }).nullable().describe('The approver who signed in; null for the owner'),
};
const accountChoices = z
  .array(z.object({ id: z.string(), email: z.string(), role: z.enum(['owner', 'approver']), current: z.boolean() }))
  .describe(
    'Every account the signed-in person belongs to (the one they own first); switch with POST /api/auth/switch-account. Only the current one for a key.',
  );

/**
 * Dashboard sessions on the site root (/api/auth/...), outside the versioned API: login sets the
 * HttpOnly session cookie and the readable CSRF cookie; logout ends the session server-side and
 * clears both. Programs use API keys instead. A session belongs to a person (one login) and works in
 * one of their accounts at a time: the one they own, or one they approve for.
 */
const signedIn = z.object({
  ok: z.literal(true),
  account,
  ...person,
  accounts: accountChoices,
  csrfToken: z.string().describe('Also in the csrf_token cookie; echo it in X-CSRF-Token'),
  expiresAt: z.string().describe('ISO 8601'),
});

const choicesOf = (memberships: MembershipRow[], currentAccountId: string) =>
  memberships.map((m) => ({ id: m.account_id, email: m.account_email, role: m.role, current: m.account_id === currentAccountId }));

const invalidCredentials = () =>
  new PlatformError('invalid_credentials', 'Email or password is wrong', { hint: 'Check both and try again; register with POST /api/v1/register.' });

const sessionRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings } = app.deps;
  const throttle = new LoginThrottle(redis, settings.REDIS_PREFIX, settings);

  /** Opens a dashboard session for a person in one of their accounts and sets its cookies; the sign-in answer. */
  async function signIn(reply: FastifyReply, personId: string, memberships: MembershipRow[], current: MembershipRow, userAgent?: string) {
    const session = await openDashboardSession(sql, settings, current.account_id, current.member_id, personId, userAgent ?? null);
    setSessionCookies(reply, settings, session);
    return {
      ok: true as const,
      account: { id: current.account_id, email: current.account_email },
      role: current.role,
      member: current.member_id ? { id: current.member_id, email: current.member_email ?? '' } : null,
      accounts: choicesOf(memberships, current.account_id),
      csrfToken: session.csrfToken,
      expiresAt: session.expiresAt.toISOString(),
    };
  }

  /** Tells the person by e-mail (once per alert window) that many networks fail at their address. */
  async function alertPerson(request: FastifyRequest, email: string, failingClients: number) {
    const personId = await personIdByEmail(sql, email);
    // An address nobody signs in with has nobody to tell.
    if (!personId) return;
    try {
      await enqueueEmail(redis, settings.REDIS_PREFIX, {
        kind: 'login-alert',
        personId,
        failingClients,
        windowSeconds: settings.LOGIN_ALERT_WINDOW_SECONDS,
      });
      request.log.warn({ personId, failingClients }, 'many clients fail to sign in at one address; its person is told');
    } catch (error) {
      request.log.error({ err: error, personId }, 'could not queue the failed sign-in alert');
    }
  }

  app.post(
    '/api/auth/login',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Log in to the dashboard: sets the session cookie (HttpOnly) and the csrf_token cookie',
        description:
          'A wrong password and an unknown email get the same 401 `invalid_credentials`. Failures slow down the client that makes them (per client address, and per address and client), never the e-mail address as a whole: a correct password from a client that is not itself slowed down signs in. A slowed-down client gets 429 with Retry-After. The session opens in the account the person owns, else the first they approve for; `accounts` lists them all. Browser calls that change state with the cookie must send the csrf_token back in X-CSRF-Token from the site origin.',
        body: z.object({ email: z.string().trim().min(1).max(254), password: z.string().min(1).max(1000) }).strict(),
        response: {
          200: signedIn,
          ...errorResponses(400, 401, 403, 429, 503),
        },
      },
    },
    async (request, reply) => {
      // A login form posted from another site must not log the browser into an attacker's account.
      assertSameOrigin(request, settings, { required: false });
      const addressDigest = createHash('sha256').update(request.body.email.toLowerCase()).digest('base64url');
      const client = clientAddress(request.ip);
      await throttle.assertMayTry(addressDigest, client);
      const found = await authenticatePerson(sql, request.body.email, request.body.password);
      if (!found) {
        const { failingClients, alert } = await throttle.recordFailure(addressDigest, client);
        if (alert) await alertPerson(request, request.body.email, failingClients);
        throw invalidCredentials();
      }
      await throttle.recordSuccess(addressDigest, client);
      return signIn(reply, found.person.id, found.memberships, found.memberships[0]!, request.headers['user-agent']);
    },
  );

  app.post(
    '/api/auth/accept-invite',
    {
      config: { rateLimit: 'login' },
      schema: {
        tags: TAGS,
        summary: 'Accept an approver invitation and sign in (sets the session cookies, as login does)',
        description: `The token is the one in the invitation e-mail's link (after #token=). It works once and expires; a spent, expired or replaced token is 400. A new address chooses its password here (${PASSWORD_POLICY}); an address that already signs in gives its own password (401 \`invalid_credentials\` when wrong; the link still works) and the account joins that login.`,
        body: z.object({ token: z.string().min(20).max(200), password: z.string().max(1000).describe(PASSWORD_POLICY) }).strict(),
        response: { 200: signedIn, ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request, reply) => {
      assertSameOrigin(request, settings, { required: false });
      const { token, password } = request.body;
      const { member, person: accepted } = await acceptInvitation(sql, token, password);
      const memberships = await listMemberships(sql, accepted.id);
      const current = memberships.find((m) => m.member_id === member.id);
      if (!current) throw new PlatformError('validation_failed', 'The account that invited you no longer exists');
      request.log.info({ memberId: member.id }, 'approver accepted the invitation');
      return signIn(reply, accepted.id, memberships, current, request.headers['user-agent']);
    },
  );

  app.post(
    '/api/auth/switch-account',
    {
      config: { auth: 'key', approver: true },
      schema: {
        tags: TAGS,
        summary: 'Switch the dashboard session to another account the signed-in person belongs to (new session cookies; the old session ends)',
        description:
          'Cookie sessions only (a key belongs to one account). The account must be one of `accounts` in GET /api/auth/session; any other is 404.',
        body: z.object({ accountId: z.string().min(1).max(100) }).strict(),
        response: { 200: signedIn, ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const token = request.cookies[SESSION_COOKIE];
      if (auth.via !== 'cookie' || !token) {
        throw new PlatformError('validation_failed', 'Only a dashboard session switches accounts', {
          hint: 'An API key belongs to one account: use a key of the account you want.',
        });
      }
      const session = await verifyDashboardSession(sql, settings, token);
      const memberships = session.personId ? await listMemberships(sql, session.personId) : [];
      const target = memberships.find((m) => m.account_id === request.body.accountId);
      if (!session.personId || !target)
        throw notFound(`Account ${request.body.accountId} among yours`, 'GET /api/auth/session lists the accounts you belong to.');
      const answer = await signIn(reply, session.personId, memberships, target, request.headers['user-agent']);
      await closeDashboardSession(sql, session.sessionId);
      return answer;
    },
  );

  app.post(
    '/api/auth/logout',
    {
      schema: {
        tags: TAGS,
        summary: 'Log out: ends the session (the token stops working at once) and clears the cookies',
        description: 'With a live session, the same CSRF rules as other cookie-authenticated changes apply. Without one it only clears the cookies.',
        response: {
          200: z.object({ ok: z.literal(true), loggedOut: z.boolean().describe('false when there was no live session') }),
          ...errorResponses(403),
        },
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
            accounts: accountChoices,
            via: z.enum(['key', 'cookie']),
            keyKind: z.enum(['api', 'agent']).nullable().describe('null for the session cookie'),
          }),
          ...errorResponses(401, 403, 429),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { account: row, member } = await callerIdentity(sql, auth);
      const token = request.cookies[SESSION_COOKIE];
      const session = auth.via === 'cookie' && token ? await verifyDashboardSession(sql, settings, token) : null;
      const memberships = session?.personId ? await listMemberships(sql, session.personId) : [];
      return {
        ok: true as const,
        account: { id: row.id, email: row.email },
        role: auth.role,
        member,
        accounts: memberships.length > 0 ? choicesOf(memberships, row.id) : [{ id: row.id, email: row.email, role: auth.role, current: true }],
        via: auth.via,
        keyKind: auth.keyKind,
      };
    },
  );
};

export default sessionRoutes;
