import type { FastifyInstance } from 'fastify';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, expectError, expectOk } from '../helpers/app.js';
import { loginUser, registerUser, type RegisteredUser } from '../helpers/session.js';

let app: FastifyInstance;
let origin: string;
beforeAll(async () => {
  app = await createTestApp();
  origin = new URL(app.deps.settings.PUBLIC_URL).origin;
});
afterAll(async () => app.close());

const login = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/api/auth/login', payload, headers });
const listKeys = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/api/v1/keys', headers });
const createKey = (headers: Record<string, string>) =>
  app.inject({ method: 'POST', url: '/api/v1/keys', headers, payload: { name: 'from dashboard' } });
const logout = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/api/auth/logout', headers });

describe('POST /api/auth/login', () => {
  let user: RegisteredUser;
  beforeAll(async () => {
    user = await registerUser(app);
  });

  it('sets an HttpOnly SameSite=Lax session cookie with a signed JWT and a readable csrf_token cookie', async () => {
    const res = await login({ email: user.email.toUpperCase(), password: user.password });
    const body = expectOk<{ account: { id: string; email: string }; csrfToken: string; expiresAt: string }>(res);
    expect(body.account).toEqual({ id: user.accountId, email: user.email });
    const session = res.cookies.find((c) => c.name === 'session');
    const csrf = res.cookies.find((c) => c.name === 'csrf_token');
    expect(session, JSON.stringify(res.headers['set-cookie'])).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', maxAge: 43_200 });
    expect(session?.secure).toBeFalsy();
    expect(csrf).toMatchObject({ value: body.csrfToken, sameSite: 'Lax', path: '/' });
    expect(csrf?.httpOnly).toBeFalsy();
    const claims = decodeJwt(session?.value ?? '');
    expect(claims).toMatchObject({ sub: user.accountId, iss: origin, aud: 'dashboard', jti: expect.stringMatching(/^dsh_/) });
    expect((claims.exp ?? 0) - (claims.iat ?? 0)).toBe(43_200);
    expect(JSON.stringify(claims)).not.toContain(body.csrfToken);
  });

  it('answers the same 401 invalid_credentials for a wrong password, an unknown email and a password-less account', async () => {
    const wrong = expectError(await login({ email: user.email, password: 'not the password at all' }), 401, 'invalid_credentials');
    const unknown = expectError(await login({ email: `nobody-${user.email}`, password: user.password }), 401, 'invalid_credentials');
    const [passwordless] = await app.deps.sql<{ email: string }[]>`
      insert into accounts (email) values (${`nopw-${user.email}`}) returning email`;
    const none = expectError(await login({ email: passwordless?.email, password: user.password }), 401, 'invalid_credentials');
    expect(unknown).toEqual(wrong);
    expect(none).toEqual(wrong);
  });

  it('answers 400 for missing fields and 403 for a login form posted from another site', async () => {
    expectError(await login({ email: user.email }), 400, 'validation_failed');
    expectError(await login({ password: user.password }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/auth/login' }), 400, 'body_missing');
    const res = await login({ email: user.email, password: user.password }, { origin: 'https://evil.example' });
    expectError(res, 403, 'csrf_failed');
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('marks the cookies Secure when the site is served over HTTPS', async () => {
    const secureApp = await createTestApp({ PUBLIC_URL: 'https://platform.example', SESSION_TTL_SECONDS: '600' });
    try {
      const res = await secureApp.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email, password: user.password } });
      expectOk(res);
      for (const cookie of res.cookies) expect(cookie, cookie.name).toMatchObject({ secure: true, maxAge: 600 });
    } finally {
      await secureApp.close();
    }
  });
});

describe('the session cookie as a credential', () => {
  it('authenticates reads without a CSRF token and writes with Origin and X-CSRF-Token', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const list = expectOk<{ keys: Array<{ id: string }> }>(await listKeys({ cookie: browser.cookie }));
    expect(list.keys.map((k) => k.id)).toEqual([user.keyId]);
    const who = expectOk<{ via: string; keyKind: null; account: { id: string } }>(
      await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: browser.cookie } }),
    );
    expect(who).toMatchObject({ via: 'cookie', keyKind: null, account: { id: user.accountId } });

    expectOk(await createKey(browser.writeHeaders), 201);
    // A Referer from the site stands in for a missing Origin.
    expectOk(await createKey({ cookie: browser.cookie, referer: `${origin}/keys`, 'x-csrf-token': browser.csrfToken }), 201);
    const patched = await app.inject({
      method: 'PATCH',
      url: `/api/v1/keys/${user.keyId}`,
      headers: browser.writeHeaders,
      payload: { name: 'renamed in the dashboard' },
    });
    expect(expectOk<{ key: { name: string } }>(patched).key.name).toBe('renamed in the dashboard');
  });

  it('refuses cookie-authenticated writes from another origin, without a token, or with a wrong token (403 csrf_failed)', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const other = await loginUser(app, user);
    const cases: Array<Record<string, string>> = [
      { cookie: browser.cookie, origin: 'https://evil.example', 'x-csrf-token': browser.csrfToken },
      { cookie: browser.cookie, referer: 'https://evil.example/page', 'x-csrf-token': browser.csrfToken },
      { cookie: browser.cookie, origin: 'null', 'x-csrf-token': browser.csrfToken },
      { cookie: browser.cookie, 'x-csrf-token': browser.csrfToken },
      { cookie: browser.cookie, origin },
      { cookie: browser.cookie, origin, 'x-csrf-token': '' },
      { cookie: browser.cookie, origin, 'x-csrf-token': 'guessed' },
      // Another session's token (e.g. planted in the csrf_token cookie) does not fit this session.
      { cookie: `session=${browser.token}; csrf_token=${other.csrfToken}`, origin, 'x-csrf-token': other.csrfToken },
    ];
    for (const headers of cases) expectError(await createKey(headers), 403, 'csrf_failed');
    expectError(
      await app.inject({ method: 'DELETE', url: `/api/v1/keys/${user.keyId}`, headers: { cookie: browser.cookie, origin: 'https://evil.example' } }),
      403,
      'csrf_failed',
    );
    const list = expectOk<{ keys: Array<{ id: string; status: string }> }>(await listKeys({ cookie: browser.cookie }));
    expect(list.keys).toEqual([expect.objectContaining({ id: user.keyId, status: 'enabled' })]);
  });

  it('refuses the cookie on any request another site started (Sec-Fetch-Site), so a link cannot make a priced GET spend', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const balance = (site?: string) =>
      app.inject({ method: 'GET', url: '/api/v1/balance', headers: { cookie: browser.cookie, ...(site ? { 'sec-fetch-site': site } : {}) } });
    const before = expectOk<{ balance: number }>(await balance('same-origin')).balance;
    expectOk(await balance('none'));
    expectOk(await balance());
    expectError(await balance('cross-site'), 403, 'csrf_failed');
    expectError(await balance('same-site'), 403, 'csrf_failed');
    const priced = await app.inject({
      method: 'GET',
      url: '/api/v1/docs/no-such-section',
      headers: { cookie: browser.cookie, 'sec-fetch-site': 'cross-site' },
    });
    expectError(priced, 403, 'csrf_failed');
    expect(expectOk<{ balance: number }>(await balance('same-origin')).balance).toBe(before);
    // A key is not a browser credential: the header does not matter for it.
    expectOk(
      await app.inject({
        method: 'GET',
        url: '/api/v1/balance',
        headers: { authorization: `Bearer ${user.fullKey}`, 'sec-fetch-site': 'cross-site' },
      }),
    );
  });

  it('needs no CSRF token for key-authenticated writes, and a key wins over a cookie', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    expectOk(await createKey({ authorization: `Bearer ${user.fullKey}`, origin: 'https://evil.example' }), 201);
    expectOk(await createKey({ authorization: `Bearer ${user.fullKey}`, cookie: browser.cookie }), 201);
  });
});

describe('POST /api/auth/logout', () => {
  it('ends the session server-side: the replayed cookie gets 401, and the cookies are cleared', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const kept = await loginUser(app, user);
    expectOk(await listKeys({ cookie: browser.cookie }));

    const res = await logout(browser.writeHeaders);
    expect(expectOk<{ loggedOut: boolean }>(res).loggedOut).toBe(true);
    for (const name of ['session', 'csrf_token']) {
      const cleared = res.cookies.find((c) => c.name === name);
      expect(cleared, JSON.stringify(res.headers['set-cookie'])).toBeDefined();
      expect(cleared?.value).toBe('');
    }
    expectError(await listKeys({ cookie: browser.cookie }), 401, 'invalid_session');
    expectError(await createKey(browser.writeHeaders), 401, 'invalid_session');
    expect(expectOk<{ loggedOut: boolean }>(await logout(browser.writeHeaders)).loggedOut).toBe(false);
    // Other sessions of the same account are not affected.
    expectOk(await listKeys({ cookie: kept.cookie }));
  });

  it('requires the CSRF checks to end a live session, and answers 200 without one', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    expectError(await logout({ cookie: browser.cookie, origin: 'https://evil.example', 'x-csrf-token': browser.csrfToken }), 403, 'csrf_failed');
    expectOk(await listKeys({ cookie: browser.cookie }));
    expect(expectOk<{ loggedOut: boolean }>(await logout({})).loggedOut).toBe(false);
  });
});

describe('forged and expired session tokens', () => {
  const secret = () => new TextEncoder().encode(app.deps.settings.SESSION_SECRET);

  it('answers 401 invalid_session for a token signed with another secret, alg none, a tampered payload, wrong issuer or audience', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const claims = decodeJwt(browser.token);
    const sign = (key: Uint8Array, changes: Record<string, unknown> = {}) =>
      new SignJWT({ ...claims, ...changes }).setProtectedHeader({ alg: 'HS256' }).sign(key);
    const [header, , signature] = browser.token.split('.');
    const otherPayload = Buffer.from(JSON.stringify({ ...claims, sub: '00000000-0000-0000-0000-000000000000' })).toString('base64url');
    const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    const forged = [
      await sign(new TextEncoder().encode('another-secret-that-is-long-enough-0123456789')),
      unsigned,
      `${header}.${otherPayload}.${signature}`,
      await sign(secret(), { iss: 'https://evil.example' }),
      await sign(secret(), { aud: 'api' }),
      await sign(secret(), { sub: '00000000-0000-0000-0000-000000000000' }),
      await sign(secret(), { jti: 'dsh_0000000000000000' }),
      'not-a-jwt',
    ];
    for (const token of forged) expectError(await listKeys({ cookie: `session=${token}` }), 401, 'invalid_session');
  });

  it('answers 401 for an expired token even while its session row is live', async () => {
    const user = await registerUser(app);
    const browser = await loginUser(app, user);
    const claims = decodeJwt(browser.token);
    const expired = await new SignJWT({ ...claims, exp: Math.floor(Date.now() / 1000) - 5 })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(app.deps.settings.SESSION_SECRET));
    const body = expectError(await listKeys({ cookie: `session=${expired}` }), 401, 'invalid_session');
    expect(body.error).toMatch(/expired/);
    // And a token whose session row has expired on the server.
    await app.deps.sql`update dashboard_sessions set expires_at = now() - interval '1 second' where id = ${claims.jti as string}`;
    expectError(await listKeys({ cookie: browser.cookie }), 401, 'invalid_session');
  });
});
