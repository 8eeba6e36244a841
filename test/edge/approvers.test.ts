import type { FastifyInstance } from 'fastify';
import { Queue, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { emailJob } from '#core/notifications';
import { createRedis } from '#core/platform';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import type { AddressInfo } from 'node:net';
import { createTestApi, openSse, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { inviteLinkIn, recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { browserSessionFrom, loginUser, registerUser, TEST_PASSWORD, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

/**
 * Approvers (issue 18): an owner invites people by e-mail; the invitation arrives over real SMTP
 * (smtp-server in this process, sent by the e-mail queue's processor on a BullMQ worker); the person
 * accepts with a password, signs in, sees and completes the account's human steps (all, or those
 * assigned to them) and is refused everything else.
 */
describe('approvers', () => {
  const taskQueue = uniqueId('approvers-');
  const redisPrefix = uniqueId('apr');
  const publicUrl = 'http://127.0.0.1:3999';
  let app: FastifyInstance;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;
  let worker: RunningWorker;
  let owner: RegisteredUser;
  let ownerSession: BrowserSession;

  beforeAll(async () => {
    mail = await startMailServer();
    app = await createTestApp({ TEMPORAL_TASK_QUEUE: taskQueue, REDIS_PREFIX: redisPrefix, PUBLIC_URL: publicUrl, SSE_KEY_RECHECK_MS: '300' });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl });
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    await app.listen({ host: '127.0.0.1', port: 0 });
    owner = await registerUser(app);
    ownerSession = await loginUser(app, owner);
  }, 60_000);
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await emailWorker?.close();
    await worker?.stop();
    await workerRedis?.quit();
    await mail?.close();
  });

  const invite = (email: string, headers: Record<string, string> = bearer(owner.fullKey)) =>
    app.inject({ method: 'POST', url: '/api/v1/members', headers, payload: { email } });
  const accept = (token: string, password = TEST_PASSWORD) =>
    app.inject({ method: 'POST', url: '/api/auth/accept-invite', payload: { token, password } });
  const invitationTo = (email: string, after = 0) =>
    mail.waitFor((message) => recipientOf(message).includes(email) && mail.messages.indexOf(message) >= after);

  /** Invites a fresh address, reads the e-mail and accepts it: the approver's browser session. */
  async function newApprover(): Promise<{ id: string; email: string; session: BrowserSession }> {
    const email = `${uniqueId('approver')}@example.test`;
    const { member } = expectOk<{ member: { id: string } }>(await invite(email), 201);
    const { token } = inviteLinkIn(await invitationTo(email));
    return { id: member.id, email, session: browserSessionFrom(app, await accept(token)) };
  }

  /** A weather-alert session worked by the owner's key up to its human step. */
  async function sessionAtApproval(): Promise<string> {
    const selectedApis = { weather: await createTestApi(app.deps.sql, 'weather'), sms: await createTestApi(app.deps.sql, 'sms') };
    const started = expectOk<{ session: { sessionId: string } }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: bearer(owner.fullKey),
        payload: { selectedApis },
      }),
      201,
    );
    const id = started.session.sessionId;
    const agent = (stepId: string, resultData: unknown) =>
      app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: bearer(owner.fullKey),
        payload: { stepId, resultData } as object,
      });
    expectOk(await agent('fetch-forecast', { location: { lat: 60.39, lon: 5.32 }, severe: true, alerts: [{ title: 'Gale' }] }));
    expectOk(await agent('draft-message', { message: `Gale warning ${id}.`, recipients: ['+4712345678'] }));
    return id;
  }

  const pendingFor = async (session: BrowserSession) =>
    expectOk<{ humanSteps: { sessionId: string; stepId: string; assignee: { id: string; email: string } | null }[] }>(
      await app.inject({ method: 'GET', url: '/api/v1/me/human-steps', headers: { cookie: session.cookie } }),
    ).humanSteps;

  it('invites by e-mail: the message carries a one-time link that is in no API answer and in no queued job', async () => {
    const email = `${uniqueId('invitee')}@example.test`;
    const before = mail.messages.length;
    const created = expectOk<{ member: Record<string, unknown> }>(await invite(email), 201);
    expect(created.member).toMatchObject({ email, role: 'approver', status: 'invited', acceptedAt: null });
    const message = await invitationTo(email, before);
    // The inviting account's address is not verified: the e-mail names no sender.
    expect(message.subject).toBe('You are invited to approve steps on Service');
    expect(`${message.subject} ${message.text} ${message.html}`).not.toContain(owner.email);
    const { link, token } = inviteLinkIn(message);
    expect(link.startsWith(`${publicUrl}/accept-invite#token=`)).toBe(true);
    expect(message.html).toContain(`href="${link}"`);

    const listed = await app.inject({ method: 'GET', url: '/api/v1/members', headers: bearer(owner.fullKey) });
    expect(expectOk<{ members: { email: string; status: string }[] }>(listed).members).toEqual([
      expect.objectContaining({ email, status: 'invited' }),
    ]);
    expect(listed.body).not.toContain(token);
    const queue = new Queue(emailJob.queue, { connection: workerRedis, prefix: redisPrefix });
    const jobs = await queue.getJobs(['completed', 'waiting', 'active', 'failed']);
    await queue.close();
    expect(jobs.length).toBeGreaterThan(0);
    for (const job of jobs) expect(JSON.stringify(job.data) + JSON.stringify(job.returnvalue)).not.toContain(token);
  });

  it("refuses the account's own address, a second invitation of one address to the account, and agent keys", async () => {
    expectError(await invite(owner.email.toUpperCase()), 409, 'conflict');
    const email = `${uniqueId('twice')}@example.test`;
    expectOk(await invite(email), 201);
    const again = expectError(await invite(email.toUpperCase()), 409, 'conflict');
    expect(again.hint).toContain('resend-invite');
    const agent = expectOk<{ fullKey: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: bearer(owner.fullKey), payload: { name: 'agent' } }),
      201,
    );
    expectError(await invite(`${uniqueId('x')}@example.test`, bearer(agent.fullKey)), 403, 'agent_key_forbidden');
    expectError(await invite('not an address'), 400, 'validation_failed');
  });

  it('an invitation reserves nothing: the address registers and other accounts invite it, pending or expired', async () => {
    const email = `${uniqueId('squatted')}@example.test`;
    const { member } = expectOk<{ member: { id: string } }>(await invite(email), 201);
    const { token } = inviteLinkIn(await invitationTo(email));
    // Another account invites the same address while the first invitation is pending.
    const other = await registerUser(app);
    expectOk(await invite(email, bearer(other.fullKey)), 201);
    // The first invitation expires: its link stops working, and it still holds nothing elsewhere.
    await app.deps.sql`update account_members set invite_expires_at = now() - interval '1 second' where id = ${member.id}`;
    expectError(await accept(token), 400, 'validation_failed');
    const third = await registerUser(app);
    expectOk(await invite(email, bearer(third.fullKey)), 201);
    // And the address's own person registers an account of their own.
    const registered = expectOk<{ account: { email: string } }>(
      await app.inject({ method: 'POST', url: '/api/v1/register', payload: { email, password: TEST_PASSWORD } }),
      201,
    );
    expect(registered.account.email).toBe(email);
  });

  it('answers an invitation alike whether or not the address signs in somewhere', async () => {
    const someone = await registerUser(app);
    const stranger = `${uniqueId('nobody')}@example.test`;
    const shape = (res: Awaited<ReturnType<typeof invite>>) => {
      const body = expectOk<{ member: Record<string, unknown> }>(res, 201);
      return { status: res.statusCode, keys: Object.keys(body.member).sort(), member: { ...body.member, id: 'x', email: 'x', invitedAt: 'x' } };
    };
    expect(shape(await invite(someone.email))).toEqual(shape(await invite(stranger)));
    const approver = await newApprover();
    expect(shape(await invite(approver.email, bearer(someone.fullKey)))).toEqual(
      shape(await invite(`${uniqueId('nobody')}@example.test`, bearer(someone.fullKey))),
    );
  });

  it('one login, many accounts: an address that signs in accepts with its own password and switches between its accounts', async () => {
    const person = await registerUser(app);
    const { member } = expectOk<{ member: { id: string } }>(await invite(person.email), 201);
    const { token } = inviteLinkIn(await invitationTo(person.email));
    // Its own password, not a new one: a wrong one is refused and the link keeps working.
    expectError(await accept(token, 'a brand new password 123'), 401, 'invalid_credentials');
    const accepted = browserSessionFrom(app, await accept(token, person.password));
    const choices = [
      { id: person.accountId, email: person.email, role: 'owner' },
      { id: owner.accountId, email: owner.email, role: 'approver' },
    ];
    const me = async (cookie: string) =>
      expectOk<{ account: { id: string }; role: string; member: { id: string } | null; accounts: { id: string; current: boolean }[] }>(
        await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie } }),
      );
    expect(await me(accepted.cookie)).toMatchObject({
      account: { id: owner.accountId },
      role: 'approver',
      member: { id: member.id },
      accounts: [
        { ...choices[0], current: false },
        { ...choices[1], current: true },
      ],
    });
    // Signing in opens the account they own; the approver's account is one switch away.
    const signedIn = await loginUser(app, person);
    expect(await me(signedIn.cookie)).toMatchObject({
      account: { id: person.accountId },
      role: 'owner',
      accounts: [{ current: true }, { current: false }],
    });
    const switchTo = (session: BrowserSession, accountId: string) =>
      app.inject({ method: 'POST', url: '/api/auth/switch-account', headers: session.writeHeaders, payload: { accountId } });
    const switched = await switchTo(signedIn, owner.accountId);
    const asApprover = browserSessionFrom(app, switched);
    expect(await me(asApprover.cookie)).toMatchObject({ account: { id: owner.accountId }, role: 'approver', member: { id: member.id } });
    expectError(await app.inject({ method: 'GET', url: '/api/v1/keys', headers: { cookie: asApprover.cookie } }), 403, 'approver_forbidden');
    // The session it replaced has ended.
    expectError(await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: signedIn.cookie } }), 401, 'invalid_session');
    // Only the person's own accounts, only with the session cookie and its CSRF token.
    const stranger = await registerUser(app);
    expectError(await switchTo(asApprover, stranger.accountId), 404, 'not_found');
    expectError(
      await app.inject({
        method: 'POST',
        url: '/api/auth/switch-account',
        headers: { cookie: asApprover.cookie },
        payload: { accountId: person.accountId },
      }),
      403,
      'csrf_failed',
    );
    expectError(
      await app.inject({ method: 'POST', url: '/api/auth/switch-account', headers: bearer(person.fullKey), payload: { accountId: owner.accountId } }),
      400,
      'validation_failed',
    );
    const back = browserSessionFrom(app, await switchTo(asApprover, person.accountId));
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/keys', headers: { cookie: back.cookie } }));
    // Removed from the owner's account, the person keeps their own.
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/members/${member.id}`, headers: bearer(owner.fullKey) }));
    expect((await me((await loginUser(app, person)).cookie)).accounts).toEqual([{ ...choices[0], current: true }]);
  });

  it('an approver who accepted first registers an account of their own with the same password, never with another', async () => {
    const approver = await newApprover();
    const register = (password: string) => app.inject({ method: 'POST', url: '/api/v1/register', payload: { email: approver.email, password } });
    expectError(await register('another password entirely'), 409, 'conflict');
    const own = expectOk<{ account: { id: string } }>(await register(TEST_PASSWORD), 201);
    const session = await loginUser(app, { email: approver.email, password: TEST_PASSWORD });
    const me = expectOk<{ account: { id: string }; role: string; accounts: { id: string; role: string }[] }>(
      await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: session.cookie } }),
    );
    expect(me).toMatchObject({ account: { id: own.account.id }, role: 'owner' });
    expect(me.accounts.map((a) => [a.id, a.role])).toEqual([
      [own.account.id, 'owner'],
      [owner.accountId, 'approver'],
    ]);
    expectError(await register(TEST_PASSWORD), 409, 'conflict');
  });

  it('caps invitation e-mails per account per day, resends included, with a 429 that says when', async () => {
    const capped = await createTestApp({ REDIS_PREFIX: uniqueId('cap'), INVITES_PER_ACCOUNT_PER_DAY: '2' });
    try {
      const someone = await registerUser(capped);
      const send = (email: string) => capped.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(someone.fullKey), payload: { email } });
      const { member } = expectOk<{ member: { id: string } }>(await send(`${uniqueId('cap')}@example.test`), 201);
      expectOk(await capped.inject({ method: 'POST', url: `/api/v1/members/${member.id}/resend-invite`, headers: bearer(someone.fullKey) }));
      const refused = await send(`${uniqueId('cap')}@example.test`);
      const body = expectError(refused, 429, 'rate_limited');
      expect(body.error).toContain('2 invitation e-mails');
      expect(body.hint).toContain('INVITES_PER_ACCOUNT_PER_DAY');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(86_000);
      expectError(
        await capped.inject({ method: 'POST', url: `/api/v1/members/${member.id}/resend-invite`, headers: bearer(someone.fullKey) }),
        429,
        'rate_limited',
      );
      // Another account's allowance is its own.
      const other = await registerUser(capped);
      expectOk(
        await capped.inject({
          method: 'POST',
          url: '/api/v1/members',
          headers: bearer(other.fullKey),
          payload: { email: `${uniqueId('cap')}@example.test` },
        }),
        201,
      );
    } finally {
      await capped.close();
    }
  });

  it('accepts once with a password that passes the policy, then signs in as an approver', async () => {
    const email = `${uniqueId('accepts')}@example.test`;
    expectOk(await invite(email), 201);
    const { token } = inviteLinkIn(await invitationTo(email));
    expectError(await accept(token, 'short'), 400, 'validation_failed');
    expectError(await accept('x'.repeat(43)), 400, 'validation_failed');
    const accepted = expectOk<{ role: string; account: { id: string }; member: { email: string } }>(await accept(token));
    expect(accepted).toMatchObject({ role: 'approver', account: { id: owner.accountId }, member: { email } });
    // The link is spent.
    expectError(await accept(token), 400, 'validation_failed');

    const session = await loginUser(app, { email, password: TEST_PASSWORD });
    const me = expectOk<{ role: string; member: { email: string }; account: { id: string } }>(
      await app.inject({ method: 'GET', url: '/api/auth/session', headers: { cookie: session.cookie } }),
    );
    expect(me).toMatchObject({ role: 'approver', member: { email }, account: { id: owner.accountId } });
    const listed = expectOk<{ members: { email: string; status: string; acceptedAt: string | null }[] }>(
      await app.inject({ method: 'GET', url: '/api/v1/members', headers: bearer(owner.fullKey) }),
    );
    expect(listed.members.find((m) => m.email === email)).toMatchObject({ status: 'active', acceptedAt: expect.any(String) });
  });

  it('an approver cannot create keys, top up, read usage or the balance, manage members, or use the directory', async () => {
    const { session } = await newApprover();
    const as = (method: string, url: string, payload?: object) =>
      app.inject({
        method: method as 'GET',
        url,
        headers: method === 'GET' ? { cookie: session.cookie } : session.writeHeaders,
        ...(payload ? { payload } : {}),
      });
    expectError(await as('POST', '/api/v1/keys', { name: 'mine' }), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/keys'), 403, 'approver_forbidden');
    expectError(await as('POST', '/api/v1/agent-keys', { name: 'mine' }), 403, 'approver_forbidden');
    expectError(await as('POST', '/api/v1/balance', { amount: 5 }), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/balance'), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/usage'), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/usage/stats'), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/members'), 403, 'approver_forbidden');
    expectError(await as('POST', '/api/v1/members', { email: `${uniqueId('y')}@example.test` }), 403, 'approver_forbidden');
    // Priced reads spend the owner's money.
    expectError(await as('GET', '/api/v1/apis/xkcd.com/instructions'), 403, 'approver_forbidden');
    expectError(await as('GET', '/api/v1/docs/authentication'), 403, 'approver_forbidden');
    expectError(await as('POST', '/api/v1/cookbooks/weather-alert-sms/start', { selectedApis: {} }), 403, 'approver_forbidden');
    // What it may do answers.
    expectOk(await as('GET', '/api/v1/me/human-steps'));
    expectOk(await as('GET', '/api/v1/cookbooks/sessions'));
    // The owner's balance is untouched by all of that.
    const balance = expectOk<{ balance: number }>(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(owner.fullKey) }));
    expect(balance.balance).toBeGreaterThan(0);
  });

  it("sees the account's human steps, completes one (recorded as theirs), and cannot complete an agent's step", async () => {
    const approver = await newApprover();
    const id = await sessionAtApproval();
    expect((await pendingFor(approver.session)).map((s) => s.sessionId)).toContain(id);
    const completed = await app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
      headers: approver.session.writeHeaders,
      payload: { stepId: 'approve-wording', resultData: { approved: true } },
    });
    expect(expectOk<{ session: { currentStep: string } }>(completed).session.currentStep).toBe('send-sms');
    const detail = expectOk<{ session: { steps: { stepId: string; completedByName: string | null }[] } }>(
      await app.inject({ method: 'GET', url: `/api/v1/cookbooks/sessions/${id}`, headers: { cookie: approver.session.cookie } }),
    );
    expect(detail.session.steps.find((s) => s.stepId === 'approve-wording')?.completedByName).toBe(approver.email);
    // send-sms is the agent's.
    expectError(
      await app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: approver.session.writeHeaders,
        payload: { stepId: 'send-sms', resultData: { messageIds: ['m1'] } },
      }),
      403,
      'approver_forbidden',
    );
  });

  it('a step assigned to one approver is hidden from the others, who cannot complete it; null gives it back to the first taker', async () => {
    const first = await newApprover();
    const second = await newApprover();
    const id = await sessionAtApproval();
    const assign = (memberId: string | null, headers: Record<string, string> = bearer(owner.fullKey)) =>
      app.inject({ method: 'PUT', url: `/api/v1/cookbooks/sessions/${id}/steps/approve-wording/assignee`, headers, payload: { memberId } });
    // Only the owner assigns, only an approver of this account, only the waiting human step.
    expectError(await assign(first.id, second.session.writeHeaders), 403, 'approver_forbidden');
    expectError(await assign('mbr_0000000000000000'), 404, 'not_found');
    expectError(
      await app.inject({
        method: 'PUT',
        url: `/api/v1/cookbooks/sessions/${id}/steps/send-sms/assignee`,
        headers: bearer(owner.fullKey),
        payload: { memberId: first.id },
      }),
      409,
      'conflict',
    );
    expect(expectOk<{ assignee: { email: string } }>(await assign(first.id)).assignee.email).toBe(first.email);

    expect((await pendingFor(second.session)).some((s) => s.sessionId === id)).toBe(false);
    expect((await pendingFor(first.session)).find((s) => s.sessionId === id)?.assignee).toEqual({ id: first.id, email: first.email });
    expect((await pendingFor(ownerSession)).find((s) => s.sessionId === id)?.assignee?.email).toBe(first.email);
    const completeAs = (session: BrowserSession) =>
      app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: session.writeHeaders,
        payload: { stepId: 'approve-wording', resultData: { approved: true } },
      });
    expectError(await completeAs(second.session), 403, 'step_assigned_elsewhere');

    expect(expectOk<{ assignee: null }>(await assign(null)).assignee).toBeNull();
    expect((await pendingFor(second.session)).some((s) => s.sessionId === id)).toBe(true);
    expectOk(await completeAs(second.session));
  });

  it('removing an approver ends their session at once, closes the event stream they hold, and voids an unused invitation; resending replaces the link', async () => {
    const removed = await newApprover();
    const id = await sessionAtApproval();
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const stream = await openSse(base, `/api/v1/cookbooks/sessions/${id}/events`, { cookie: removed.session.cookie });
    expect(stream.response.statusCode).toBe(200);
    await stream.waitFor(1);
    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/members/${removed.id}`, headers: bearer(owner.fullKey) }));
    expectError(
      await app.inject({ method: 'GET', url: '/api/v1/me/human-steps', headers: { cookie: removed.session.cookie } }),
      401,
      'invalid_session',
    );
    await stream.ended;
    expect(stream.events.at(-1)).toMatchObject({ event: 'stream.closed', data: { code: 'invalid_session' } });
    expectError(
      await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: removed.email, password: TEST_PASSWORD } }),
      401,
      'invalid_credentials',
    );
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/members/${removed.id}`, headers: bearer(owner.fullKey) }), 404, 'not_found');

    const email = `${uniqueId('resend')}@example.test`;
    const { member } = expectOk<{ member: { id: string } }>(await invite(email), 201);
    const firstLink = inviteLinkIn(await invitationTo(email));
    const count = mail.messages.length;
    expectOk(await app.inject({ method: 'POST', url: `/api/v1/members/${member.id}/resend-invite`, headers: bearer(owner.fullKey) }));
    const secondLink = inviteLinkIn(await invitationTo(email, count));
    expect(secondLink.token).not.toBe(firstLink.token);
    expectError(await accept(firstLink.token), 400, 'validation_failed');

    expectOk(await app.inject({ method: 'DELETE', url: `/api/v1/members/${member.id}`, headers: bearer(owner.fullKey) }));
    expectError(await accept(secondLink.token), 400, 'validation_failed');
  });

  it('a waiting step is announced to the owner and the approvers with a link to it; a rejection reaches the owner with the note and who decided', async () => {
    const owner = await registerUser(app);
    const approverEmail = `${uniqueId('news')}@example.test`;
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(owner.fullKey), payload: { email: approverEmail } }), 201);
    const { token } = inviteLinkIn(await mail.waitFor((m) => recipientOf(m).includes(approverEmail)));
    const approver = browserSessionFrom(
      app,
      await app.inject({ method: 'POST', url: '/api/auth/accept-invite', payload: { token, password: TEST_PASSWORD } }),
    );

    const selectedApis = { weather: await createTestApi(app.deps.sql, 'weather'), sms: await createTestApi(app.deps.sql, 'sms') };
    const started = expectOk<{ session: { sessionId: string } }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: bearer(owner.fullKey),
        payload: { selectedApis },
      }),
      201,
    );
    const id = started.session.sessionId;
    const agent = (stepId: string, resultData: unknown) =>
      app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: bearer(owner.fullKey),
        payload: { stepId, resultData } as object,
      });
    expectOk(await agent('fetch-forecast', { location: { lat: 60.39, lon: 5.32 }, severe: true, alerts: [{ title: 'Gale' }] }));
    expectOk(await agent('draft-message', { message: 'Gale tonight.', recipients: ['+4712345678'] }));

    const link = `${publicUrl}/inbox?session=${encodeURIComponent(id)}&step=approve-wording`;
    for (const person of [owner.email, approverEmail]) {
      const waiting = await mail.waitFor(
        (m) => recipientOf(m).includes(person) && (m.text ?? '').includes(id) && m.subject?.startsWith('Waiting for you') === true,
      );
      expect(waiting.subject).toBe('Waiting for you: A person approves the wording (Severe-weather alert by SMS, approved by a human)');
      expect(waiting.text).toContain(link);
      // What the agent drafted stays behind the sign-in.
      expect(waiting.text).not.toContain('Gale tonight.');
    }

    expectOk(
      await app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${id}/complete-step`,
        headers: approver.writeHeaders,
        payload: { stepId: 'approve-wording', resultData: {}, decision: 'reject', note: 'Not severe enough.' },
      }),
    );
    const rejected = await mail.waitFor(
      (m) => recipientOf(m).includes(owner.email) && m.subject?.startsWith('Rejected') === true && (m.text ?? '').includes(id),
    );
    expect(rejected.text).toContain(`${approverEmail} rejected`);
    expect(rejected.text).toContain('Their note: Not severe enough.');
    expect(rejected.text).toContain(`${publicUrl}/sessions/${encodeURIComponent(id)}`);
    // Each piece of news once per person, however the activities were retried.
    const about = mail.messages.filter((m) => (m.text ?? '').includes(id));
    expect(about.map((m) => `${recipientOf(m)} ${m.subject}`).sort()).toEqual(
      [
        `${owner.email} Waiting for you: A person approves the wording (Severe-weather alert by SMS, approved by a human)`,
        `${approverEmail} Waiting for you: A person approves the wording (Severe-weather alert by SMS, approved by a human)`,
        `${owner.email} Rejected: A person approves the wording (Severe-weather alert by SMS, approved by a human)`,
      ].sort(),
    );
  }, 30_000);
});
