import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { inviteLinkIn, recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { browserSessionFrom, loginUser, registerUser, TEST_PASSWORD, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';

/** The link of a verification or e-mail change message, and its token. */
function linkIn(mail: ParsedMail, path: '/verify-email' | '/confirm-email'): { link: string; token: string } {
  const link = new RegExp(`https?://\\S+${path}#token=[A-Za-z0-9_-]+`).exec(mail.text ?? '')?.[0];
  if (!link) throw new Error(`no ${path} link in: ${mail.text}`);
  return { link, token: link.slice(link.indexOf('#token=') + '#token='.length) };
}

interface AccountInfo {
  id: string;
  email: string;
  emailVerified: boolean;
  emailVerifiedAt: string | null;
  pendingEmail: string | null;
  verificationRequired: boolean;
  balance: number;
}

/**
 * The account's own life (issue 33): the address verified at sign-up (and what an unverified account
 * may not do), changed only once the new address confirms (the old one told), and the account
 * deleted with its password: keys revoked, sessions ended, cookbook sessions cancelled, the address
 * erased, the ledger kept. E-mail goes over real SMTP, sent by the e-mail queue's processor.
 */
describe('account lifecycle: verification, e-mail change, deletion', () => {
  const taskQueue = uniqueId('acct-life-');
  const redisPrefix = uniqueId('alc');
  const publicUrl = 'http://127.0.0.1:3997';
  let app: FastifyInstance;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;
  let worker: RunningWorker;

  beforeAll(async () => {
    mail = await startMailServer();
    app = await createTestApp({
      TEMPORAL_TASK_QUEUE: taskQueue,
      REDIS_PREFIX: redisPrefix,
      PUBLIC_URL: publicUrl,
      EMAIL_VERIFICATION: 'required',
      // Discovery's feedback on (off in the other test apps): what discovery listed to the account is kept until it is deleted.
      DISCOVERY_FEEDBACK_REFRESH_SECONDS: '600',
    });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl });
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
  }, 60_000);
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await emailWorker?.close();
    await worker?.stop();
    await workerRedis?.quit();
    await mail?.close();
  });

  const mailTo = (email: string, subject: string, after = 0) =>
    mail.waitFor((m) => recipientOf(m).includes(email) && m.subject === subject && mail.messages.indexOf(m) >= after);
  const accountOf = async (headers: Record<string, string>) =>
    expectOk<{ account: AccountInfo }>(await app.inject({ method: 'GET', url: '/api/v1/account', headers })).account;
  const verify = (token: string) => app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } });
  const resend = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/api/v1/account/verification-email', headers });
  const topUp = (user: RegisteredUser, amount = 5) =>
    app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(user.fullKey), payload: { amount } });
  const login = (email: string, password = TEST_PASSWORD) => app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });

  async function verifiedUser(): Promise<RegisteredUser> {
    const user = await registerUser(app);
    expectOk(await verify(linkIn(await mailTo(user.email, 'Verify your e-mail address for Service'), '/verify-email').token));
    return user;
  }

  describe('e-mail verification', () => {
    it('mails a link at sign-up; until it is opened the account may not add funds or invite approvers', async () => {
      const user = await registerUser(app);
      const message = await mailTo(user.email, 'Verify your e-mail address for Service');
      const { link, token } = linkIn(message, '/verify-email');
      expect(link.startsWith(`${publicUrl}/verify-email#token=`)).toBe(true);
      expect(message.text).toContain('cannot add funds or invite approvers');

      const before = await accountOf(bearer(user.fullKey));
      expect(before).toMatchObject({
        id: user.accountId,
        email: user.email,
        emailVerified: false,
        emailVerifiedAt: null,
        verificationRequired: true,
      });
      expect(before.balance).toBeGreaterThan(0);
      const refused = expectError(await topUp(user), 403, 'email_unverified');
      expect(refused.error).toBe("Verify the account's e-mail address before you add funds");
      expect(refused.hint).toContain(user.email);
      const invite = await app.inject({
        method: 'POST',
        url: '/api/v1/members',
        headers: bearer(user.fullKey),
        payload: { email: `${uniqueId('ap')}@example.test` },
      });
      expectError(invite, 403, 'email_unverified');
      // Free calls and everything else work meanwhile.
      expectOk(await app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(user.fullKey) }));

      const verified = expectOk<{ email: string }>(await verify(token));
      expect(verified.email).toBe(user.email);
      const after = await accountOf(bearer(user.fullKey));
      expect(after.emailVerified).toBe(true);
      expect(Date.parse(after.emailVerifiedAt!)).toBeGreaterThan(Date.now() - 60_000);
      expectOk(await topUp(user));
      // The link worked once.
      expectError(await verify(token), 400, 'validation_failed');
      expectError(await resend(bearer(user.fullKey)), 409, 'conflict');
    });

    it('a resent link replaces the earlier one; an expired link is refused', async () => {
      const user = await registerUser(app);
      const first = linkIn(await mailTo(user.email, 'Verify your e-mail address for Service'), '/verify-email').token;
      const count = mail.messages.length;
      const resent = expectOk<{ email: string; message: string }>(await resend(bearer(user.fullKey)), 202);
      expect(resent.email).toBe(user.email);
      const second = linkIn(await mailTo(user.email, 'Verify your e-mail address for Service', count), '/verify-email').token;
      expect(second).not.toBe(first);
      const stale = expectError(await verify(first), 400, 'validation_failed');
      expect(stale.error).toContain('not valid');
      await app.deps.sql`update people set verify_expires_at = now() - interval '1 second' where lower(email) = lower(${user.email})`;
      expectError(await verify(second), 400, 'validation_failed');
      expect((await accountOf(bearer(user.fullKey))).emailVerified).toBe(false);
    });

    it('the dashboard session resends too; agent keys may not, and the hourly allowance holds', async () => {
      const prefix = uniqueId('alcap');
      const capped = await createTestApp({
        REDIS_PREFIX: prefix,
        PUBLIC_URL: publicUrl,
        EMAIL_VERIFICATION: 'required',
        ACCOUNT_EMAILS_PER_PERSON_PER_HOUR: '1',
      });
      try {
        const user = await registerUser(capped);
        const session = await loginUser(capped, user);
        const agent = expectOk<{ fullKey: string }>(
          await capped.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: bearer(user.fullKey), payload: { name: 'bot' } }),
          201,
        );
        expectError(
          await capped.inject({ method: 'POST', url: '/api/v1/account/verification-email', headers: bearer(agent.fullKey) }),
          403,
          'agent_key_forbidden',
        );
        expectOk(await capped.inject({ method: 'POST', url: '/api/v1/account/verification-email', headers: session.writeHeaders }), 202);
        const limited = await capped.inject({ method: 'POST', url: '/api/v1/account/verification-email', headers: session.writeHeaders });
        expectError(limited, 429, 'rate_limited');
        expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
        // The agent key reads the account, verification state included.
        expect((await capped.inject({ method: 'GET', url: '/api/v1/account', headers: bearer(agent.fullKey) })).statusCode).toBe(200);
      } finally {
        await capped.close();
      }
    });

    it('answers bad input and missing credentials in the error shape', async () => {
      expectError(await app.inject({ method: 'GET', url: '/api/v1/account' }), 401, 'missing_credentials');
      expectError(await app.inject({ method: 'GET', url: '/api/v1/account', headers: bearer(`service_sk_${'0'.repeat(48)}`) }), 401);
      expectError(await verify('short'), 400, 'validation_failed');
      expectError(await verify('A'.repeat(43)), 400, 'validation_failed');
      expectError(await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: {} }), 400, 'validation_failed');
      expectError(
        await app.inject({ method: 'POST', url: '/api/auth/verify-email', headers: { 'content-type': 'application/json' }, payload: '{"token":' }),
        400,
      );
    });
  });

  describe('changing the address', () => {
    const change = (session: BrowserSession, newEmail: unknown, password: unknown = TEST_PASSWORD) =>
      app.inject({ method: 'POST', url: '/api/auth/email-change', headers: session.writeHeaders, payload: { newEmail, password } });
    const confirm = (token: string) => app.inject({ method: 'POST', url: '/api/auth/email-change/confirm', payload: { token } });

    it('changes only when the new address confirms, tells the old one, and moves the login and the account', async () => {
      const user = await verifiedUser();
      const session = await loginUser(app, user);
      const newEmail = `${uniqueId('moved')}@example.test`;

      expectError(await change(session, newEmail, 'not my password'), 401, 'invalid_credentials');
      expectError(await change(session, user.email.toUpperCase()), 400, 'validation_failed');
      const other = await registerUser(app);
      const taken = expectError(await change(session, other.email), 409, 'email_taken');
      expect(taken.hint).toBeTruthy();

      const asked = expectOk<{ pendingEmail: string; message: string }>(await change(session, newEmail), 202);
      expect(asked.pendingEmail).toBe(newEmail);
      const state = expectOk<{ email: string; emailVerified: boolean; pendingEmail: string }>(
        await app.inject({ method: 'GET', url: '/api/auth/email', headers: { cookie: session.cookie } }),
      );
      expect(state).toMatchObject({ email: user.email, emailVerified: true, pendingEmail: newEmail });
      expect((await accountOf(bearer(user.fullKey))).pendingEmail).toBe(newEmail);

      const { token } = linkIn(await mailTo(newEmail, 'Confirm your new e-mail address for Service'), '/confirm-email');
      // Nothing changed yet: the old address still signs in.
      expectOk(await login(user.email));
      expectError(await login(newEmail), 401, 'invalid_credentials');

      const confirmed = expectOk<{ email: string; previousEmail: string }>(await confirm(token));
      expect(confirmed).toMatchObject({ email: newEmail, previousEmail: user.email });
      const notice = await mailTo(user.email, 'Your Service sign-in address was changed');
      expect(notice.text).toContain(newEmail);

      expectOk(await login(newEmail));
      expectError(await login(user.email), 401, 'invalid_credentials');
      const account = await accountOf(bearer(user.fullKey));
      expect(account).toMatchObject({ email: newEmail, emailVerified: true, pendingEmail: null });
      // The session that asked stays signed in; the link worked once.
      expectOk(await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: session.cookie } }));
      expectError(await confirm(token), 400, 'validation_failed');
    });

    it('a cancelled change leaves its link dead; keys and bad input are refused', async () => {
      const user = await verifiedUser();
      const session = await loginUser(app, user);
      const newEmail = `${uniqueId('cancel')}@example.test`;
      expectOk(await change(session, newEmail), 202);
      const { token } = linkIn(await mailTo(newEmail, 'Confirm your new e-mail address for Service'), '/confirm-email');
      expectOk(await app.inject({ method: 'DELETE', url: '/api/auth/email-change', headers: session.writeHeaders }));
      expectError(await app.inject({ method: 'DELETE', url: '/api/auth/email-change', headers: session.writeHeaders }), 404, 'not_found');
      expectError(await confirm(token), 400, 'validation_failed');
      expectOk(await login(user.email));

      const byKey = await app.inject({
        method: 'POST',
        url: '/api/auth/email-change',
        headers: bearer(user.fullKey),
        payload: { newEmail, password: TEST_PASSWORD },
      });
      expectError(byKey, 400, 'validation_failed');
      expectError(await change(session, 'not an address'), 400, 'validation_failed');
      expectError(await change(session, newEmail, 42), 400, 'validation_failed');
      // Without the CSRF token a cookie cannot change the address.
      const noCsrf = await app.inject({
        method: 'POST',
        url: '/api/auth/email-change',
        headers: { cookie: session.cookie, origin: publicUrl },
        payload: { newEmail, password: TEST_PASSWORD },
      });
      expectError(noCsrf, 403, 'csrf_failed');
    });
  });

  describe('deleting the account', () => {
    const remove = (headers: Record<string, string>, body: Record<string, unknown>) =>
      app.inject({ method: 'DELETE', url: '/api/v1/account', headers, payload: body });

    it('revokes keys, ends sessions, cancels cookbook sessions, erases the address and keeps the ledger', async () => {
      const user = await verifiedUser();
      const session = await loginUser(app, user);
      const other = await loginUser(app, user);
      // An approver of this account, and this person approving for another account.
      const approverEmail = `${uniqueId('apr')}@example.test`;
      expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(user.fullKey), payload: { email: approverEmail } }), 201);
      const elsewhere = await verifiedUser();
      const inviteCount = mail.messages.length;
      expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(elsewhere.fullKey), payload: { email: user.email } }), 201);
      const { token: inviteToken } = inviteLinkIn(await mailTo(user.email, 'You are invited to approve steps on Service', inviteCount));
      expectOk(await app.inject({ method: 'POST', url: '/api/auth/accept-invite', payload: { token: inviteToken, password: TEST_PASSWORD } }));

      const selectedApis = { weather: await createTestApi(app.deps.sql, 'weather'), sms: await createTestApi(app.deps.sql, 'sms') };
      const started = expectOk<{ session: { sessionId: string } }>(
        await app.inject({
          method: 'POST',
          url: '/api/v1/cookbooks/weather-alert-sms/start',
          headers: bearer(user.fullKey),
          payload: { selectedApis },
        }),
        201,
      );
      // What discovery listed to the account (discovery's feedback) goes with it.
      expectOk(await app.inject({ method: 'GET', url: '/api/v1/discover?q=weather+forecast', headers: bearer(user.fullKey) }));
      await app.discoveryListings!.flush();
      const listingsOf = () => app.deps.sql`select 1 from discovery_listings where account_id = ${user.accountId}`;
      expect(await listingsOf()).toHaveLength(1);
      const { balance } = await accountOf(bearer(user.fullKey));
      expect(balance).toBeGreaterThan(0);

      expectError(await remove(bearer(user.fullKey), { password: TEST_PASSWORD, forfeitBalance: true }), 400, 'validation_failed');
      expectError(await remove(session.writeHeaders, { password: 'not my password', forfeitBalance: true }), 401, 'invalid_credentials');
      const unconfirmed = expectError(await remove(session.writeHeaders, { password: TEST_PASSWORD }), 409, 'balance_remaining');
      expect(unconfirmed.balance).toBe(balance);
      expect(unconfirmed.error).toContain(`$${balance.toFixed(2)}`);

      const res = await remove(session.writeHeaders, { password: TEST_PASSWORD, forfeitBalance: true });
      const { deleted } = expectOk<{
        deleted: { accountId: string; forfeited: number; keysRevoked: number; dashboardSessionsEnded: number; cookbookSessionsCancelled: number };
      }>(res);
      expect(deleted).toMatchObject({ accountId: user.accountId, forfeited: balance, keysRevoked: 1, cookbookSessionsCancelled: 1 });
      expect(deleted.dashboardSessionsEnded).toBeGreaterThanOrEqual(2);
      expect(res.cookies.find((c) => c.name === 'session')?.value).toBe('');

      expectError(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(user.fullKey) }), 403, 'key_revoked');
      expectError(await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: other.cookie } }), 401, 'invalid_session');
      expectError(await login(user.email), 401, 'invalid_credentials');

      await until(
        'the running cookbook session is cancelled',
        async () => {
          const [row] = await app.deps.sql<{ status: string }[]>`select status from cookbook_sessions where id = ${started.session.sessionId}`;
          return row?.status === 'cancelled';
        },
        10_000,
      );

      const [account] = await app.deps.sql<{ email: string; owner_person_id: string | null; deleted_at: Date | null; balance_micros: bigint }[]>`
        select email, owner_person_id, deleted_at, balance_micros from accounts where id = ${user.accountId}`;
      expect(account!.email).toBe(`deleted-${user.accountId}@deleted.invalid`);
      expect(account!.owner_person_id).toBeNull();
      expect(account!.deleted_at).not.toBeNull();
      expect(account!.balance_micros).toBe(0n);
      const ledger = await app.deps.sql<{ kind: string; amount_micros: bigint }[]>`
        select kind, amount_micros from ledger_entries where account_id = ${user.accountId} order by seq`;
      expect(ledger.map((e) => e.kind)).toEqual(['signup_credit', 'forfeit']);
      expect(ledger[1]!.amount_micros).toBe(-BigInt(Math.round(balance * 1_000_000)));
      const people = await app.deps.sql`select id from people where lower(email) = lower(${user.email})`;
      expect(people).toHaveLength(0);
      expect(await listingsOf()).toHaveLength(0);
      const approvers = await app.deps.sql<{ removed_at: Date | null }[]>`
        select removed_at from account_members where account_id = ${user.accountId}`;
      expect(approvers.every((m) => m.removed_at !== null)).toBe(true);
      const memberships = await app.deps.sql<{ removed_at: Date | null; person_id: string | null }[]>`
        select removed_at, person_id from account_members where account_id = ${elsewhere.accountId}`;
      expect(memberships).toHaveLength(1);
      expect(memberships[0]!.removed_at).not.toBeNull();

      const goodbye = await mailTo(user.email, 'Your Service account was deleted');
      expect(goodbye.text).toContain(`$${balance.toFixed(2)}`);
      // The address is free again.
      expectOk(await app.inject({ method: 'POST', url: '/api/v1/register', payload: { email: user.email, password: TEST_PASSWORD } }), 201);
    });

    it('an empty balance needs no confirmation; an approver cannot delete the account', async () => {
      const owner = await verifiedUser();
      const approverEmail = `${uniqueId('apr')}@example.test`;
      const count = mail.messages.length;
      expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(owner.fullKey), payload: { email: approverEmail } }), 201);
      const { token } = inviteLinkIn(await mailTo(approverEmail, 'You are invited to approve steps on Service', count));
      const approver = browserSessionFrom(
        app,
        await app.inject({ method: 'POST', url: '/api/auth/accept-invite', payload: { token, password: TEST_PASSWORD } }),
      );
      expectError(await remove(approver.writeHeaders, { password: TEST_PASSWORD, forfeitBalance: true }), 403, 'approver_forbidden');

      await app.deps.sql`update accounts set balance_micros = 0 where id = ${owner.accountId}`;
      const session = await loginUser(app, owner);
      const { deleted } = expectOk<{ deleted: { forfeited: number } }>(await remove(session.writeHeaders, { password: TEST_PASSWORD }));
      expect(deleted.forfeited).toBe(0);
      expectError(await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: approver.cookie } }), 401, 'invalid_session');
      const goodbye = await mailTo(owner.email, 'Your Service account was deleted');
      expect(goodbye.text).toContain('No balance was left');
    });

    it('answers bad input in the error shape', async () => {
      const user = await verifiedUser();
      const session = await loginUser(app, user);
      expectError(await remove(session.writeHeaders, {}), 400, 'validation_failed');
      expectError(await remove(session.writeHeaders, { password: TEST_PASSWORD, forfeitBalance: 'yes' }), 400, 'validation_failed');
      expectError(await remove(session.writeHeaders, { password: TEST_PASSWORD, extra: 1 }), 400, 'validation_failed');
      expectError(await app.inject({ method: 'DELETE', url: '/api/v1/account', payload: { password: TEST_PASSWORD } }), 401, 'missing_credentials');
      const noCsrf = await app.inject({
        method: 'DELETE',
        url: '/api/v1/account',
        headers: { cookie: session.cookie, origin: publicUrl },
        payload: { password: TEST_PASSWORD, forfeitBalance: true },
      });
      expectError(noCsrf, 403, 'csrf_failed');
      // Nothing was deleted by the refused calls.
      expect((await accountOf(bearer(user.fullKey))).email).toBe(user.email);
    });
  });
});
