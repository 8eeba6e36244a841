import type { FastifyReply, FastifyRequest } from 'fastify';
import { csrfTokenMatches, type DashboardSession, type DashboardSessionSettings } from '#core/identity';
import { PlatformError } from '#core/platform';

// The HTTP half of dashboard sessions (core identity opens and verifies them): cookies, and the
// Origin / Sec-Fetch-Site / CSRF checks a browser request must pass to use the session cookie.

/** HttpOnly cookie carrying the session JWT. */
export const SESSION_COOKIE = 'session';
/** Readable cookie carrying the CSRF token the dashboard echoes in X-CSRF-Token. */
export const CSRF_COOKIE = 'csrf_token';
export const CSRF_HEADER = 'x-csrf-token';

const secure = (settings: DashboardSessionSettings) => new URL(settings.PUBLIC_URL).protocol === 'https:';

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
  if (site === 'cross-site' || site === 'same-site')
    throw csrfFailed(`A request started by another site (Sec-Fetch-Site: ${site}) cannot use the session cookie`);
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
 * the site's origin AND the X-CSRF-Token header must be the token issued with this session.
 */
export function assertCsrf(request: FastifyRequest, settings: DashboardSessionSettings, session: DashboardSession): void {
  assertSameOrigin(request, settings, { required: true });
  const header = request.headers[CSRF_HEADER];
  if (typeof header !== 'string' || header.length === 0) throw csrfFailed('X-CSRF-Token header is missing');
  if (!csrfTokenMatches(session, header)) throw csrfFailed('X-CSRF-Token does not match this session');
}
