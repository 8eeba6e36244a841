import type { FastifyInstance, FastifyRequest } from 'fastify';
import { routeOf } from '../http/route-options.js';
import fp from 'fastify-plugin';
import { PlatformError } from '#core/platform';
import { callerFromKey, callerFromSession, KeyVerifier, type Caller } from '#core/identity';
import { KEY_PREFIX } from '#contracts/key-format';
import { clientAddress, isLimited } from './rate-limit.js';
import { verifyDashboardSession, type DashboardSession } from '#core/identity';
import { assertCsrf, assertNotCrossSite, SESSION_COOKIE } from '../http/dashboard-session.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Route-level auth requirement, declared in the route's `config.auth`:
 * - 'none': public (the default);
 * - 'optional': public, but credentials a request carries are checked like 'key' and make it the
 *   caller's (the directory answers "can I call this?" for that caller); a key that does not verify
 *   is refused as on any route, a dashboard cookie that does not is ignored (the answer is then the
 *   anonymous one: a stale browser session must not break browsing);
 * - 'key': any credential: an API key, an agent key or the dashboard cookie;
 * - 'account': like 'key' but agent keys are refused with 403 (managing keys, connections, funds);
 * - 'apiKey': an API key or agent key only, never the dashboard cookie (the proxy: its answers are
 *   third-party content served on the dashboard's origin, so a cookie must not be able to drive it).
 */
export type AuthRequirement = 'none' | 'optional' | 'key' | 'account' | 'apiKey';

/** What an approver (a member signed in to the dashboard) may do; see `config.approver`. */
const APPROVER_HINT =
  "Approvers see and complete the account's human steps (the dashboard's inbox) and nothing else; ask the account's owner for anything more.";

/** The caller of a request (core identity's Caller), set by this plugin on authenticated routes. */
export type AuthContext = Caller;

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthRequirement;
    /**
     * True on the few routes an approver's session may use (human steps, the sessions they belong
     * to, who-am-I). Every other authenticated route refuses approvers with 403, so a new route is
     * closed to them until it says otherwise.
     */
    approver?: boolean;
    /**
     * True on the MCP endpoint: a Bearer token that is not a platform key is taken as an access token
     * of the platform's authorization server (oauth2/), standing for the agent key its grant made.
     */
    oauthAccessTokens?: boolean;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
    /** The dashboard session a cookie-authenticated request came with (null for keys and public routes). */
    dashboardSession: DashboardSession | null;
  }
  interface FastifyInstance {
    keyVerifier: KeyVerifier;
  }
}

/** Reads the key from `Authorization: Bearer` or `X-API-Key`; both present and different is a 401. */
export function presentedKey(request: FastifyRequest): string | null {
  const authorization = request.headers.authorization;
  const apiKeyHeader = request.headers['x-api-key'];
  let bearer: string | null = null;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    if (!match?.[1]) {
      throw new PlatformError('invalid_key', 'Authorization header must be "Bearer <API key>"', {
        hint: 'Send "Authorization: Bearer service_sk_..." or "X-API-Key: service_sk_...".',
      });
    }
    bearer = match[1];
  }
  const headerKey = Array.isArray(apiKeyHeader) ? null : (apiKeyHeader?.trim() ?? null);
  if (Array.isArray(apiKeyHeader)) throw new PlatformError('invalid_key', 'Send X-API-Key once');
  if (bearer !== null && headerKey !== null && bearer !== headerKey) {
    throw new PlatformError('invalid_key', 'Authorization and X-API-Key carry different keys', { hint: 'Send one key, in one of the two headers.' });
  }
  return bearer ?? headerKey;
}

/** The caller's auth context on a route that requires one. */
export function requireAuth(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new PlatformError('missing_credentials', 'Authentication required');
  return request.auth;
}

export default fp(
  async function authPlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    const verifier = new KeyVerifier(sql, {
      redisUrl: settings.REDIS_URL,
      redisPrefix: settings.REDIS_PREFIX,
      ttlMs: settings.KEY_CACHE_TTL_MS,
      // Announcements and the change feed's heartbeats go out on the request-path connection.
      publisher: app.deps.redis,
      log: app.log,
    });
    await verifier.start();
    app.decorate('keyVerifier', verifier);
    app.addHook('onClose', async () => verifier.stop());
    app.decorateRequest('auth', null);
    app.decorateRequest('dashboardSession', null);

    app.addHook('onRequest', async (request, reply) => {
      const requirement = routeOf(request).config.auth ?? 'none';
      if (requirement === 'none') return;
      if (requirement === 'optional') {
        if (request.headers.authorization === undefined && request.headers['x-api-key'] === undefined) {
          if (request.cookies[SESSION_COOKIE] === undefined) return;
          try {
            await authenticate(request, 'key');
          } catch {
            request.auth = null;
          }
          return;
        }
      }
      try {
        await authenticate(request, requirement);
      } catch (error) {
        // Refused credentials count against the caller's address, so guessing keys or replaying
        // cookies is throttled like any public call (and a 401 carries the limit headers).
        if (error instanceof PlatformError && error.status === 401 && isLimited(request)) {
          await app.rateLimiter.consume(request, reply, 'public', `ip:${clientAddress(request.ip)}`);
        }
        throw error;
      }
    });

    async function authenticate(request: FastifyRequest, requirement: Exclude<AuthRequirement, 'none'>): Promise<void> {
      // A key in the headers wins over a cookie: programs authenticate with keys and need no CSRF token.
      const key = presentedKey(request);
      if (key === null) {
        if (requirement === 'apiKey') {
          throw new PlatformError('missing_credentials', 'This route accepts API keys only', {
            hint: 'Send "Authorization: Bearer service_sk_..." or "X-API-Key: service_sk_..."; the dashboard\'s session cookie is not accepted here (the proxy and the MCP endpoint take keys only).',
          });
        }
        const token = request.cookies[SESSION_COOKIE];
        if (!token) {
          throw new PlatformError('missing_credentials', 'Missing API key', {
            hint: 'Send "Authorization: Bearer service_sk_..." or "X-API-Key: service_sk_..."; create a key with POST /api/v1/register or POST /api/v1/keys.',
          });
        }
        const session = await verifyDashboardSession(sql, settings, token);
        assertNotCrossSite(request);
        if (!SAFE_METHODS.has(request.method)) assertCsrf(request, settings, session);
        if (session.memberId !== null && routeOf(request).config.approver !== true) {
          throw new PlatformError('approver_forbidden', 'Approvers cannot use this route', { hint: APPROVER_HINT });
        }
        request.auth = callerFromSession(session.accountId, session.memberId, session.personId);
        request.dashboardSession = session;
        return;
      }
      if (routeOf(request).config.oauthAccessTokens === true && !key.startsWith(KEY_PREFIX)) {
        const grantKey = await (await app.authorizationServer.get()).keyForAccessToken(key);
        verifier.touch(grantKey.id);
        request.auth = callerFromKey(grantKey);
        return;
      }
      const auth = callerFromKey(await verifier.verify(key));
      if (requirement === 'account' && auth.keyKind === 'agent') {
        throw new PlatformError('agent_key_forbidden', 'Agent keys cannot manage keys, agent keys, connections or funds', {
          hint: 'Use an account API key or the dashboard for this call.',
        });
      }
      request.auth = auth;
    }
  },
  { name: 'auth', dependencies: ['deps'] },
);
