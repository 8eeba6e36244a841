import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { loginUser, registerUser, type RegisteredUser } from '../helpers/session.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

type Checklist = { items: { id: string; done: boolean }[]; done: boolean; dismissed: boolean };
const doneOf = (checklist: Checklist) => Object.fromEntries(checklist.items.map((item) => [item.id, item.done]));

/**
 * GET/POST /api/v1/me/checklist: each item of the first-run checklist from the account's own state,
 * and GET /api/v1/me/operator-tools: the Temporal UI's address for the operator's people only.
 */
describe('first-run checklist and operator tools', () => {
  let app: FastifyInstance;
  let upstream: TestUpstream;
  let api: string;
  let operator: RegisteredUser;

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    api = await registerApi({ baseUrl: upstream.url, price: '0.003' });
    const operatorEmail = `ops-${Date.now()}@example.test`;
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', OPERATOR_EMAILS: `someone@example.test, ${operatorEmail.toUpperCase()}` });
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/register',
      payload: { email: operatorEmail, password: 'correct horse battery staple' },
    });
    const body = expectOk<{ account: { id: string }; key: { id: string }; fullKey: string }>(res, 201);
    operator = {
      accountId: body.account.id,
      email: operatorEmail,
      password: 'correct horse battery staple',
      keyId: body.key.id,
      fullKey: body.fullKey,
    };
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
  });

  const checklist = async (key: string) =>
    expectOk<Checklist>(await app.inject({ method: 'GET', url: '/api/v1/me/checklist', headers: bearer(key) }));

  it('asks for credentials', async () => {
    expectError(await app.inject({ method: 'GET', url: '/api/v1/me/checklist' }), 401);
    expectError(await app.inject({ method: 'POST', url: '/api/v1/me/checklist', payload: { mark: 'dismissed' } }), 401);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/me/operator-tools' }), 401);
  });

  it('ticks each item from what the account did, and stays done', async () => {
    const user = await registerUser(app);
    // Reading the checklist with the key uses the key (its last use is recorded shortly after): it was copied somewhere.
    await expect
      .poll(async () => doneOf(await checklist(user.fullKey)), { timeout: 10_000 })
      .toEqual({
        copy_key: true,
        discover: false,
        first_call: false,
        add_funds: false,
      });

    // Browsing is not finding; a search with the account's key is.
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis?limit=5', headers: bearer(user.fullKey) }));
    expect(doneOf(await checklist(user.fullKey)).discover).toBe(false);
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/apis?q=weather', headers: bearer(user.fullKey) }));
    await expect.poll(async () => doneOf(await checklist(user.fullKey)).discover).toBe(true);

    const proxied = await app.inject({ method: 'GET', url: `/api/v1/proxy/${api}/anything`, headers: bearer(user.fullKey) });
    expect(proxied.statusCode, proxied.body).toBe(200);
    expect(doneOf(await checklist(user.fullKey)).first_call).toBe(true);
    expect((await checklist(user.fullKey)).done).toBe(false);

    expectOk(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(user.fullKey), payload: { amount: 2 } }));
    const done = await checklist(user.fullKey);
    expect(done).toMatchObject({ done: true, dismissed: false });
    expect(Object.values(doneOf(done))).toEqual([true, true, true, true]);
  });

  it('counts a discovery made with the dashboard cookie, and a copy recorded by the dashboard', async () => {
    const user = await registerUser(app);
    const session = await loginUser(app, user);
    const read = async () =>
      expectOk<Checklist>(await app.inject({ method: 'GET', url: '/api/v1/me/checklist', headers: { cookie: session.cookie } }));
    // Not one request with the key yet: nothing is done.
    expect(doneOf(await read())).toEqual({ copy_key: false, discover: false, first_call: false, add_funds: false });
    const copied = await app.inject({ method: 'POST', url: '/api/v1/me/checklist', headers: session.writeHeaders, payload: { mark: 'key_copied' } });
    expect(doneOf(expectOk<Checklist>(copied)).copy_key).toBe(true);
    expectOk(await app.inject({ method: 'GET', url: `/api/v1/apis/${api}`, headers: { cookie: session.cookie } }));
    await expect.poll(async () => doneOf(await read()).discover).toBe(true);

    const dismissed = await app.inject({
      method: 'POST',
      url: '/api/v1/me/checklist',
      headers: session.writeHeaders,
      payload: { mark: 'dismissed' },
    });
    expect(expectOk<Checklist>(dismissed)).toMatchObject({ dismissed: true, done: false });
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/me/checklist', headers: session.writeHeaders, payload: { mark: 'done' } }),
      400,
      'validation_failed',
    );
    // The cookie's writes need the CSRF token, as every other.
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/me/checklist', headers: { cookie: session.cookie }, payload: { mark: 'dismissed' } }),
      403,
    );
  });

  it("gives the Temporal UI's address to the operator's people signed in to the dashboard, and to no one else", async () => {
    const asOperator = await loginUser(app, operator);
    const tools = expectOk(await app.inject({ method: 'GET', url: '/api/v1/me/operator-tools', headers: { cookie: asOperator.cookie } }));
    expect(tools).toMatchObject({ operator: true, temporalUiUrl: app.deps.settings.TEMPORAL_UI_URL.replace(/\/+$/, '') });
    // The same person's key is a program, not the person.
    const byKey = expectOk(await app.inject({ method: 'GET', url: '/api/v1/me/operator-tools', headers: bearer(operator.fullKey) }));
    expect(byKey).toMatchObject({ operator: false, temporalUiUrl: null });
    const someone = await registerUser(app);
    const asSomeone = await loginUser(app, someone);
    const theirs = expectOk(await app.inject({ method: 'GET', url: '/api/v1/me/operator-tools', headers: { cookie: asSomeone.cookie } }));
    expect(theirs).toMatchObject({ operator: false, temporalUiUrl: null });
  });
});
