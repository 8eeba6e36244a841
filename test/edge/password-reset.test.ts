import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { loginUser, registerUser, TEST_PASSWORD, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

const NEW_PASSWORD = 'a quite different passphrase';

/** The reset link of a password reset e-mail, and its token. */
function resetLinkIn(mail: ParsedMail): { link: string; token: string } {
  const link = /https?:\/\/\S+\/reset-password#token=[A-Za-z0-9_-]+/.exec(mail.text ?? '')?.[0];
  if (!link) throw new Error(`no reset link in: ${mail.text}`);
  return { link, token: link.slice(link.indexOf('#token=') + '#token='.length) };
}

/**
 * Password reset by e-mail and the signed-in person's own login (issue 33): the request answers
 * alike for any address, the link arrives over real SMTP (smtp-server here, sent by the e-mail
 * queue's processor), works once and not after it expires, and setting a password ends every
 * dashboard session; changing the password and "sign out everywhere" end the other sessions.
 */
describe('password reset and account security', () => {
  const redisPrefix = uniqueId('pwr');
  const publicUrl = 'http://127.0.0.1:3998';
  let app: FastifyInstance;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;

  beforeAll(async () => {
    mail = await startMailServer();
    app = await createTestApp({ REDIS_PREFIX: redisPrefix, PUBLIC_URL: publicUrl });
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await emailWorker?.close();
    await workerRedis?.quit();
    await mail?.close();
  });

  const askReset = (email: unknown) => app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email } });
  const confirm = (token: string, password = NEW_PASSWORD) =>
    app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password } });
  const login = (email: string, password: string) => app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
  const whoAmI = (session: BrowserSession) => app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: session.cookie } });
  const resetMailTo = (email: string, after = 0) =>
    mail.waitFor((message) => recipientOf(message).includes(email) && mail.messages.indexOf(message) >= after);

  async function resetToken(user: RegisteredUser): Promise<string> {
    const before = mail.messages.length;
    expectOk(await askReset(user.email), 202);
    return resetLinkIn(await resetMailTo(user.email, before)).token;
  }

  it('answers a known and an unknown address alike, and mails only the known one', async () => {
    const user = await registerUser(app);
    const unknown = `${uniqueId('nobody')}@example.test`;
    const known = await askReset(user.email.toUpperCase());
    const missing = await askReset(unknown);
    expect(known.statusCode, known.body).toBe(202);
    expect(missing.statusCode, missing.body).toBe(202);
    expect(JSON.parse(missing.body)).toEqual(JSON.parse(known.body));
    const message = await resetMailTo(user.email);
    expect(message.subject).toBe('Choose a new password for Service');
    const { link } = resetLinkIn(message);
    expect(link.startsWith(`${publicUrl}/reset-password#token=`)).toBe(true);
    // Give the worker time to send anything it (wrongly) would for the unknown address.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(mail.messages.some((m) => recipientOf(m).includes(unknown))).toBe(false);
  });

  it('sets the new password once, signs out every session, refuses the old password', async () => {
    const user = await registerUser(app);
    const first = await loginUser(app, user);
    const second = await loginUser(app, user);
    expectOk(await whoAmI(first));
    const token = await resetToken(user);

    const done = expectOk<{ email: string; sessionsEnded: number }>(await confirm(token));
    expect(done.email).toBe(user.email);
    expect(done.sessionsEnded).toBe(2);
    expectError(await whoAmI(first), 401, 'invalid_session');
    expectError(await whoAmI(second), 401, 'invalid_session');
    // The API key is not a dashboard session: it keeps working.
    expectOk(await app.inject({ method: 'GET', url: '/api/auth/session', headers: bearer(user.fullKey) }));

    expectError(await confirm(token, 'yet another long passphrase'), 400, 'validation_failed');
    expectError(await login(user.email, TEST_PASSWORD), 401, 'invalid_credentials');
    expectOk(await login(user.email, NEW_PASSWORD));
  });

  it('only the newest link works, and a password that breaks the policy leaves the link usable', async () => {
    const user = await registerUser(app);
    const older = await resetToken(user);
    const newer = await resetToken(user);
    expect(newer).not.toBe(older);
    const stale = expectError(await confirm(older), 400, 'validation_failed');
    expect(stale.error).toContain('not valid');
    const weak = expectError(await confirm(newer, 'short'), 400, 'validation_failed');
    expect(weak.error).toBe('Password is too short');
    expectError(await confirm(newer, user.email), 400, 'validation_failed');
    expectOk(await confirm(newer));
  });

  it('refuses an expired link', async () => {
    const user = await registerUser(app);
    const token = await resetToken(user);
    await app.deps.sql`update people set reset_expires_at = now() - interval '1 second' where lower(email) = lower(${user.email})`;
    expectError(await confirm(token), 400, 'validation_failed');
    expectOk(await login(user.email, TEST_PASSWORD));
  });

  it('sends at most PASSWORD_RESETS_PER_ADDRESS_PER_HOUR e-mails per address, answering alike past it', async () => {
    const prefix = uniqueId('pwcap');
    const capped = await createTestApp({ REDIS_PREFIX: prefix, PUBLIC_URL: publicUrl, PASSWORD_RESETS_PER_ADDRESS_PER_HOUR: '1' });
    const cappedWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix: prefix, smtpUrl: mail.url, publicUrl });
    try {
      const user = await registerUser(capped);
      const ask = () => capped.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: user.email } });
      const first = await ask();
      const second = await ask();
      expect(second.statusCode, second.body).toBe(202);
      expect(second.body).toBe(first.body);
      await resetMailTo(user.email);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(mail.messages.filter((m) => recipientOf(m).includes(user.email))).toHaveLength(1);
    } finally {
      await cappedWorker.close();
      await capped.close();
    }
  });

  it('answers bad input in the error shape', async () => {
    expectError(await askReset('not an address'), 400, 'validation_failed');
    expectError(await askReset(42), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: {} }), 400, 'validation_failed');
    expectError(
      await app.inject({ method: 'POST', url: '/api/auth/password-reset', headers: { 'content-type': 'application/json' }, payload: '{"email":' }),
      400,
    );
    expectError(await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'x', password: NEW_PASSWORD } }), 400);
    expectError(await confirm('A'.repeat(43)), 400, 'validation_failed');
    expectError(
      await app.inject({
        method: 'POST',
        url: '/api/auth/password-reset/confirm',
        payload: { token: 'A'.repeat(43), password: NEW_PASSWORD, extra: 1 },
      }),
      400,
    );
  });

  describe('signed in', () => {
    const changePassword = (session: BrowserSession | { writeHeaders: Record<string, string> }, currentPassword: string, newPassword: string) =>
      app.inject({ method: 'POST', url: '/api/auth/password', headers: session.writeHeaders, payload: { currentPassword, newPassword } });
    const listSessions = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/api/auth/sessions', headers });

    it('changes the password with the current one and signs out the other sessions only', async () => {
      const user = await registerUser(app);
      const here = await loginUser(app, user);
      const elsewhere = await loginUser(app, user);
      expectError(await changePassword(here, 'wrong password!!', NEW_PASSWORD), 401, 'invalid_credentials');
      expectError(await changePassword(here, TEST_PASSWORD, 'short'), 400, 'validation_failed');
      expectError(await changePassword(here, TEST_PASSWORD, TEST_PASSWORD), 400, 'validation_failed');
      // Without the CSRF token a cookie cannot change the password.
      expectError(
        await app.inject({
          method: 'POST',
          url: '/api/auth/password',
          headers: { cookie: here.cookie, origin: publicUrl },
          payload: { currentPassword: TEST_PASSWORD, newPassword: NEW_PASSWORD },
        }),
        403,
      );
      const changed = expectOk<{ sessionsEnded: number }>(await changePassword(here, TEST_PASSWORD, NEW_PASSWORD));
      expect(changed.sessionsEnded).toBe(1);
      expectOk(await whoAmI(here));
      expectError(await whoAmI(elsewhere), 401, 'invalid_session');
      expectError(await login(user.email, TEST_PASSWORD), 401, 'invalid_credentials');
      expectOk(await login(user.email, NEW_PASSWORD));
    });

    it('a password change spends a pending reset link', async () => {
      const user = await registerUser(app);
      const token = await resetToken(user);
      const here = await loginUser(app, user);
      expectOk(await changePassword(here, TEST_PASSWORD, NEW_PASSWORD));
      expectError(await confirm(token, 'yet another long passphrase'), 400, 'validation_failed');
    });

    it('lists the live sessions, marks this one, and signs out everywhere else or everywhere', async () => {
      const user = await registerUser(app);
      const other = await registerUser(app);
      const here = await loginUser(app, user);
      const elsewhere = await loginUser(app, user);
      await loginUser(app, other);
      const listed = expectOk<{ sessions: { id: string; current: boolean; role: string; account: { id: string }; userAgent: string | null }[] }>(
        await listSessions({ cookie: here.cookie }),
      );
      expect(listed.sessions).toHaveLength(2);
      expect(listed.sessions.filter((s) => s.current)).toHaveLength(1);
      expect(listed.sessions.every((s) => s.account.id === user.accountId && s.role === 'owner')).toBe(true);
      expect(listed.sessions[0]!.userAgent).toBe('lightMyRequest');

      const revoked = expectOk<{ sessionsEnded: number; signedOut: boolean }>(
        await app.inject({ method: 'POST', url: '/api/auth/sessions/revoke-all', headers: here.writeHeaders }),
      );
      expect(revoked).toMatchObject({ sessionsEnded: 1, signedOut: false });
      expectOk(await whoAmI(here));
      expectError(await whoAmI(elsewhere), 401, 'invalid_session');
      const left = expectOk<{ sessions: unknown[] }>(await listSessions({ cookie: here.cookie }));
      expect(left.sessions).toHaveLength(1);

      const all = await app.inject({
        method: 'POST',
        url: '/api/auth/sessions/revoke-all',
        headers: here.writeHeaders,
        payload: { includeCurrent: true },
      });
      expect(expectOk<{ signedOut: boolean }>(all).signedOut).toBe(true);
      expect(all.cookies.find((c) => c.name === 'session')?.value).toBe('');
      expectError(await whoAmI(here), 401, 'invalid_session');
    });

    it('is for signed-in people only: no credential is 401, a key is 400, bad input is 400', async () => {
      const user = await registerUser(app);
      expectError(await listSessions({}), 401);
      expectError(await app.inject({ method: 'POST', url: '/api/auth/sessions/revoke-all' }), 401);
      expectError(await listSessions(bearer(user.fullKey)), 400, 'validation_failed');
      expectError(await changePassword({ writeHeaders: bearer(user.fullKey) }, TEST_PASSWORD, NEW_PASSWORD), 400, 'validation_failed');
      const here = await loginUser(app, user);
      expectError(
        await app.inject({ method: 'POST', url: '/api/auth/sessions/revoke-all', headers: here.writeHeaders, payload: { includeCurrent: 'yes' } }),
        400,
        'validation_failed',
      );
      expectError(
        await app.inject({ method: 'POST', url: '/api/auth/password', headers: here.writeHeaders, payload: { newPassword: NEW_PASSWORD } }),
        400,
      );
    });
  });
});
