import type { FastifyInstance } from 'fastify';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { createTestApp, expectError, expectOk } from '../helpers/app.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { registerUser, type RegisteredUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';

/**
 * Failed sign-ins (trust round 3, finding 8): counted per client and per (address, client), never
 * per address alone, so failing at someone's address from anywhere does not lock them out. The
 * failing client slows down exponentially, the wait always ends, and the person hears by e-mail
 * (the real e-mail queue and an SMTP server of this file's own) when many clients fail at once.
 */
describe('failed sign-ins', () => {
  const redisPrefix = uniqueId('lt');
  const publicUrl = 'http://127.0.0.1:3998';
  let app: FastifyInstance;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;
  /** Distinct client addresses, so the tests' counters never meet. */
  let nextClient = 1;
  const newClient = () => `198.51.100.${nextClient++}`;

  beforeAll(async () => {
    mail = await startMailServer();
    app = await createTestApp({
      REDIS_PREFIX: redisPrefix,
      PUBLIC_URL: publicUrl,
      // The shipped per-client attempt limit: until now it also applied per e-mail address, from everywhere.
      RATE_LIMIT_LOGIN_MAX: '10',
      LOGIN_FREE_FAILURES_PER_ADDRESS: '2',
      LOGIN_FREE_FAILURES_PER_CLIENT: '6',
      LOGIN_DELAY_BASE_SECONDS: '1',
      LOGIN_ALERT_CLIENTS: '3',
    });
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await emailWorker?.close();
    await workerRedis?.quit();
    await mail?.close();
  });

  const login = (user: { email: string }, password: string, client: string) =>
    app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email, password }, remoteAddress: client });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('a correct password from a client that is not slowed down signs in, however many others fail at the address', async () => {
    const victim = await registerUser(app);
    const attacker = newClient();
    for (let i = 0; i < 12; i++) expect([401, 429]).toContain((await login(victim, `wrong guess ${i}`, attacker)).statusCode);
    // Many clients, a few failures each.
    for (let i = 0; i < 8; i++) expectError(await login(victim, `wrong guess ${i}`, newClient()), 401, 'invalid_credentials');
    expectOk(await login(victim, victim.password, newClient()));
    // The guessing client itself waits, even with the right password.
    expectError(await login(victim, victim.password, attacker), 429, 'rate_limited');
  });

  it('slows the failing client down, doubling each time, and the wait always ends', async () => {
    const user = await registerUser(app);
    const client = newClient();
    for (let i = 0; i < 3; i++) expectError(await login(user, `wrong ${i}`, client), 401, 'invalid_credentials');
    const first = expectError(await login(user, 'wrong again', client), 429, 'rate_limited');
    expect(first.hint).toContain('Retry-After');
    expect((await login(user, 'wrong again', client)).headers['retry-after']).toBe('1');
    await sleep(1_100);
    expectError(await login(user, 'wrong 4', client), 401, 'invalid_credentials');
    const second = await login(user, user.password, client);
    expectError(second, 429, 'rate_limited');
    expect(second.headers['retry-after']).toBe('2');
    await sleep(2_100);
    expectOk(await login(user, user.password, client));
    // Success clears this client's failures at this address: the next slip is free again.
    expectError(await login(user, 'one slip', client), 401, 'invalid_credentials');
    expectOk(await login(user, user.password, client));
  }, 15_000);

  it('slows down one client that fails at many addresses, and only that client', async () => {
    // The account exists first: registering it (a password hash) can take longer than the client's first wait on
    // a loaded machine, and the wait must still be running when the client signs in.
    const user = await registerUser(app);
    const client = newClient();
    for (let i = 0; i < 7; i++) expectError(await login({ email: `${uniqueId('spray')}@example.test` }, 'guess', client), 401, 'invalid_credentials');
    expectError(await login(user, user.password, client), 429, 'rate_limited');
    expectOk(await login(user, user.password, newClient()));
  });

  it('e-mails the person once per window when many clients fail at their address, and nobody for an unknown one', async () => {
    const victim: RegisteredUser = await registerUser(app);
    for (let i = 0; i < 6; i++) expectError(await login(victim, 'hunter2 guess', newClient()), 401, 'invalid_credentials');
    const alert = await mail.waitFor((m) => recipientOf(m).includes(victim.email));
    expect(alert.subject).toBe('Failed sign-ins to your Service login');
    expect(alert.text).toContain('is not locked');
    expect(alert.text).toContain(`${publicUrl}/signin`);
    expect(alert.text).not.toContain('hunter2');
    const unknown = `${uniqueId('ghost')}@example.test`;
    for (let i = 0; i < 4; i++) expectError(await login({ email: unknown }, 'guess', newClient()), 401, 'invalid_credentials');
    // Give a second alert, if one were queued, the time to arrive.
    await sleep(1_500);
    expect(mail.messages.filter((m) => recipientOf(m).includes(victim.email))).toHaveLength(1);
    expect(mail.messages.filter((m) => recipientOf(m).includes(unknown))).toHaveLength(0);
    expectOk(await login(victim, victim.password, newClient()));
  }, 30_000);
});
