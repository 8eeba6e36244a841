import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { PlatformError } from '#core/platform';
import { createDashboardSession, findLiveDashboardSession } from '#db/dashboard-sessions';
import type { Db } from '#db/sql';

/** HttpOnly cookie carrying the session JWT. */
export const SESSION_COOKIE = 'session';
/** Readable cookie carrying the CSRF token the dashboard echoes in X-CSRF-Token. */
export const CSRF_COOKIE = 'csrf_token';
export const CSRF_HEADER = 'x-csrf-token';
const AUDIENCE = 'dashboard';

export interface DashboardSession {
  sessionId: string;
  accountId: string;
  expiresAt: Date;
  /** SHA-256 of the CSRF token issued with this session. */
  csrfHash: Buffer;
}

/** The settings dashboard sessions need (a subset of the edge's settings). */
export interface DashboardSessionSettings {
  SESSION_SECRET: string;
  SESSION_TTL_SECONDS: number;
  PUBLIC_URL: string;
}

const secretKey = (settings: DashboardSessionSettings) => new TextEncoder().encode(settings.SESSION_SECRET);
const issuer = (settings: DashboardSessionSettings) => new URL(settings.PUBLIC_URL).origin;
const sha256 = (text: string) => createHash('sha256').update(text).digest();
const secure = (settings: DashboardSessionSettings) => new URL(settings.PUBLIC_URL).protocol === 'https:';

/**
 * Opens a session: a row in dashboard_sessions (the server-side half that logout revokes) and an
 * HS256 JWT with `sub` (account id), `jti` (session id), `iss` (the site origin), `aud`
 * ("dashboard"), `iat`, `exp` and `csrf` (SHA-256 of the CSRF token, base64url).
 */
export async function openSession(db: Db, settings: DashboardSessionSettings, accountId: string) {
  // One clock reading for both claims: exp - iat is exactly the TTL even across a second boundary.
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = new Date((issuedAt + settings.SESSION_TTL_SECONDS) * 1000);
  const row = await createDashboardSession(db, { accountId, expiresAt });
  const csrfToken = randomBytes(32).toString('base64url');
  const token = await new SignJWT({ csrf: sha256(csrfToken).toString('base64url') })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(accountId)
    .setJti(row.id)
    .setIssuer(issuer(settings))
    .setAudience(AUDIENCE)
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + settings.SESSION_TTL_SECONDS)
    .sign(secretKey(settings));
  return { token, csrfToken, expiresAt, sessionId: row.id };
}

/** Sets both cookies: the session (HttpOnly) and the CSRF token (readable by the dashboard's script). */
export function setSessionCookies(reply: FastifyReply, settings: DashboardSessionSettings, session: { token: string; csrfToken: string }): void {
  const common = { path: '/', sameSite: 'lax' as const, secure: secure(settings), maxAge: settings.SESSION_TTL_SECONDS };
  reply.setCookie(SESSION_COOKIE, session.token, { ...common, httpOnly: true });
  reply.setCookie(CSRF_COOKIE, session.csrfToken, { ...common, httpOnly: false });
}

export function clearSessionCookies(reply: FastifyReply, settings: DashboardSessionSettings): void {
  const common = { path: '/', sameSite: 'lax' as const, secure: secure(settings) };
  reply.clearCookie(SESSION_COOKIE, { ...common, httpOnly: true });
  reply.clearCookie(CSRF_COOKIE, { ...common, httpOnly: false });
}

const invalidSession = (message: string) =>
  new PlatformError('invalid_session', message, { hint: 'Log in again with POST /api/auth/login, or use an API key.' });

/**
 * Verifies a session cookie: the JWT's signature (HS256 only), issuer, audience and expiry, then
 * that its session row is still live (not logged out). Any failure is 401 `invalid_session`.
 */
export async function verifySession(db: Db, settings: DashboardSessionSettings, token: string): Promise<DashboardSession> {
  let payload;
  try {
    ({ payload } = await jwtVerify(token, secretKey(settings), { algorithms: ['HS256'], issuer: issuer(settings), audience: AUDIENCE }));
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw invalidSession('Session has expired');
    throw invalidSession('Session is invalid');
  }
  const { jti, sub, csrf, exp } = payload;
  if (typeof jti !== 'string' || typeof sub !== 'string' || typeof csrf !== 'string' || typeof exp !== 'number') {
    throw invalidSession('Session is invalid');
  }
  const row = await findLiveDashboardSession(db, jti);
  if (!row || row.account_id !== sub) throw invalidSession('Session has ended');
  return { sessionId: row.id, accountId: row.account_id, expiresAt: row.expires_at, csrfHash: Buffer.from(csrf, 'base64url') };
}

const csrfFailed = (message: string) =>
  new PlatformError('csrf_failed', message, {
    hint: 'Browser calls that change state must come from the dashboard origin and send the csrf_token cookie back in an X-CSRF-Token header; programs should use an API key instead.',
  });

/** The origin a browser says the request comes from: Origin, or failing that the Referer's origin. */
function requestOrigin(request: FastifyRequest): string | null {
  const origin = request.headers.origin;
  if (typeof origin === 'string' && origin !== 'null') return origin;
  const referer = request.headers.referer;
  if (typeof referer === 'string') {
    try {
      return new URL(referer).origin;
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * The cookie also rides along on top-level navigations from other sites (SameSite=Lax), which are
 * GETs, and some GETs spend money (instructions, doc sections, cookbook details, proxy calls). A
 * browser names the initiator in Sec-Fetch-Site; a request another site started is refused, whatever
 * its method. Requests without the header (older browsers, curl with a cookie) are not affected.
 */
export function assertNotCrossSite(request: FastifyRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') throw csrfFailed(`A request started by another site (Sec-Fetch-Site: ${site}) cannot use the session cookie`);
}

/** A browser call must come from the site's own origin; a call naming another origin is refused. */
export function assertSameOrigin(request: FastifyRequest, settings: DashboardSessionSettings, { required }: { required: boolean }): void {
  const origin = requestOrigin(request);
  if (origin === null) {
    if (required) throw csrfFailed('Origin or Referer header is required on cookie-authenticated changes');
    return;
  }
  if (origin !== new URL(settings.PUBLIC_URL).origin) throw csrfFailed(`Cross-origin request from ${origin} refused`);
}

/**
 * CSRF protection for a state-changing, cookie-authenticated request: the Origin (or Referer) must be
 * the site's origin AND the X-CSRF-Token header must be the token issued with this session (its
 * SHA-256 is a claim of the signed JWT, so a token planted in the csrf cookie by another site does
 * not pass). Compared in constant time.
 */
export function assertCsrf(request: FastifyRequest, settings: DashboardSessionSettings, session: DashboardSession): void {
  assertSameOrigin(request, settings, { required: true });
  const header = request.headers[CSRF_HEADER];
  if (typeof header !== 'string' || header.length === 0) throw csrfFailed('X-CSRF-Token header is missing');
  const given = sha256(header);
  if (given.length !== session.csrfHash.length || !timingSafeEqual(given, session.csrfHash)) throw csrfFailed('X-CSRF-Token does not match this session');
}
