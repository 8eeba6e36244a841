import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { PlatformError } from '#core/platform';
import { createDashboardSession, findLiveDashboardSession, revokeDashboardSession } from '#db/dashboard-sessions';
import type { Db } from '#db/sql';

const AUDIENCE = 'dashboard';

export interface DashboardSession {
  sessionId: string;
  accountId: string;
  /** The approver who signed in, or null for the account's owner. */
  memberId: string | null;
  /** The person signed in (who may switch to another of their accounts); null for sessions older than people. */
  personId: string | null;
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

/**
 * Opens a session: a row in dashboard_sessions (the server-side half that logout revokes) and an
 * HS256 JWT with `sub` (account id), `jti` (session id), `iss` (the site origin), `aud`
 * ("dashboard"), `iat`, `exp` and `csrf` (SHA-256 of the CSRF token, base64url).
 */
export async function openDashboardSession(
  db: Db,
  settings: DashboardSessionSettings,
  accountId: string,
  memberId: string | null = null,
  personId: string | null = null,
  userAgent: string | null = null,
) {
  // One clock reading for both claims: exp - iat is exactly the TTL even across a second boundary.
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = new Date((issuedAt + settings.SESSION_TTL_SECONDS) * 1000);
  const row = await createDashboardSession(db, { accountId, memberId, personId, userAgent, expiresAt });
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

const invalidSession = (message: string) =>
  new PlatformError('invalid_session', message, { hint: 'Log in again with POST /api/auth/login, or use an API key.' });

/**
 * Verifies a session cookie: the JWT's signature (HS256 only), issuer, audience and expiry, then
 * that its session row is still live (not logged out). Any failure is 401 `invalid_session`.
 */
export async function verifyDashboardSession(db: Db, settings: DashboardSessionSettings, token: string): Promise<DashboardSession> {
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
  return {
    sessionId: row.id,
    accountId: row.account_id,
    memberId: row.member_id,
    personId: row.person_id,
    expiresAt: row.expires_at,
    csrfHash: Buffer.from(csrf, 'base64url'),
  };
}

/** Ends a dashboard session for good (logout); false when it had already ended. */
export async function closeDashboardSession(db: Db, sessionId: string): Promise<boolean> {
  return revokeDashboardSession(db, sessionId);
}

/**
 * Whether a presented CSRF token is the one issued with this session (its SHA-256 is a claim of the
 * signed JWT, so a token planted in the csrf cookie by another site does not pass). Constant time.
 */
export function csrfTokenMatches(session: DashboardSession, presented: string): boolean {
  const given = sha256(presented);
  return given.length === session.csrfHash.length && timingSafeEqual(given, session.csrfHash);
}
