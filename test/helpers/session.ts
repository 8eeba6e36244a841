import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expectOk } from './app.js';
import { uniqueId } from './settings.js';

export const TEST_PASSWORD = 'correct horse battery staple';

export interface RegisteredUser {
  accountId: string;
  email: string;
  password: string;
  keyId: string;
  fullKey: string;
}

/** Registers a fresh account through POST /api/v1/register (real password hashing, sign-up credit). */
export async function registerUser(app: FastifyInstance, password = TEST_PASSWORD): Promise<RegisteredUser> {
  const email = `${uniqueId('reg')}@example.test`;
  const res = await app.inject({ method: 'POST', url: '/api/v1/register', payload: { email, password } });
  const body = expectOk<{ account: { id: string }; key: { id: string }; fullKey: string }>(res, 201);
  return { accountId: body.account.id, email, password, keyId: body.key.id, fullKey: body.fullKey };
}

export interface BrowserSession {
  /** The Cookie header a browser would send: session and csrf_token. */
  cookie: string;
  csrfToken: string;
  /** The raw session JWT. */
  token: string;
  /** Headers of a same-origin, CSRF-protected state-changing call. */
  writeHeaders: Record<string, string>;
}

/** Logs in through POST /api/auth/login and returns what a browser would then hold. */
export async function loginUser(app: FastifyInstance, user: { email: string; password: string }): Promise<BrowserSession> {
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email, password: user.password } });
  return browserSessionFrom(app, res);
}

/** What a browser holds after an answer that signed it in (login, accepting an invitation). */
export function browserSessionFrom(app: FastifyInstance, res: LightMyRequestResponse): BrowserSession {
  const body = expectOk<{ csrfToken: string }>(res);
  const jar = new Map(res.cookies.map((c) => [c.name, c.value]));
  const token = jar.get('session');
  const csrf = jar.get('csrf_token');
  if (!token || !csrf) throw new Error(`login set no session cookies: ${JSON.stringify(res.headers['set-cookie'])}`);
  const cookie = `session=${token}; csrf_token=${csrf}`;
  return {
    cookie,
    csrfToken: body.csrfToken,
    token,
    writeHeaders: { cookie, origin: new URL(app.deps.settings.PUBLIC_URL).origin, 'x-csrf-token': body.csrfToken },
  };
}
