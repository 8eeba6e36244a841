import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { TEST_PASSWORD } from '../helpers/session.js';

describe('POST /api/v1/register', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createTestApp({ SIGNUP_CREDIT_DOLLARS: '1.25' });
  });
  afterAll(async () => app.close());

  const register = (payload: unknown) => app.inject({ method: 'POST', url: '/api/v1/register', payload: payload as Record<string, unknown> });
  const email = () => `${uniqueId('reg')}@Example.test`;

  it('creates the account, its first key (returned once, working at once) and the sign-up credit on the ledger', async () => {
    const address = email();
    const body = expectOk<{
      account: { id: string; email: string };
      key: { id: string; name: string; prefix: string; status: string; createdAt: string; lastUsedAt: null };
      fullKey: string;
      balance: number;
    }>(await register({ email: address, password: TEST_PASSWORD }), 201);
    expect(body.account.email).toBe(address);
    expect(body.fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expect(body.key).toMatchObject({ name: 'default', status: 'enabled', prefix: body.fullKey.slice(0, 19), lastUsedAt: null });
    expect(body.balance).toBe(1.25);

    const ledger = await app.deps.sql<{ kind: string; amount_micros: bigint }[]>`
      select kind, amount_micros from ledger_entries where account_id = ${body.account.id}`;
    expect(ledger).toEqual([{ kind: 'signup_credit', amount_micros: 1_250_000n }]);
    // The password belongs to the person who signs in (people), not to the account.
    const [stored] = await app.deps.sql<{ password_hash: string }[]>`
      select p.password_hash from accounts a join people p on p.id = a.owner_person_id where a.id = ${body.account.id}`;
    expect(stored?.password_hash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(stored?.password_hash).not.toContain(TEST_PASSWORD);

    const keys = expectOk<{ keys: Array<Record<string, unknown>> }>(
      await app.inject({ method: 'GET', url: '/api/v1/keys', headers: bearer(body.fullKey) }),
    );
    expect(keys.keys.map((k) => k.id)).toEqual([body.key.id]);
    expect(JSON.stringify(keys)).not.toContain(body.fullKey);
  });

  it('answers 409 for an email that exists in any letter case, and leaves no half-made account', async () => {
    const address = email();
    expectOk(await register({ email: address, password: TEST_PASSWORD }), 201);
    const res = await register({ email: address.toUpperCase(), password: TEST_PASSWORD });
    expectError(res, 409, 'conflict');
    const [row] = await app.deps.sql<{ n: number }[]>`select count(*)::int as n from accounts where lower(email) = lower(${address})`;
    expect(row?.n).toBe(1);
  });

  it('registers an address that only has a pending invitation (an invitation reserves nothing)', async () => {
    const inviter = expectOk<{ fullKey: string }>(await register({ email: email(), password: TEST_PASSWORD }), 201);
    const address = email();
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(inviter.fullKey), payload: { email: address } }), 201);
    expect(expectOk<{ account: { email: string } }>(await register({ email: address, password: TEST_PASSWORD }), 201).account.email).toBe(address);
  });

  it('lets exactly one of concurrent registrations of the same email through', async () => {
    const address = email();
    const results = await Promise.all(
      [address, address.toLowerCase(), address.toUpperCase()].map((e) => register({ email: e, password: TEST_PASSWORD })),
    );
    expect(results.map((r) => r.statusCode).sort(), results.map((r) => r.body).join('\n')).toEqual([201, 409, 409]);
    const [row] = await app.deps.sql<{ accounts: number; keys: number; credits: number }[]>`
      select count(distinct a.id)::int as accounts, count(distinct k.id)::int as keys, count(distinct l.id)::int as credits
        from accounts a left join api_keys k on k.account_id = a.id left join ledger_entries l on l.account_id = a.id
       where lower(a.email) = lower(${address})`;
    expect(row).toEqual({ accounts: 1, keys: 1, credits: 1 });
  });

  it('answers 400 for a bad email, naming the field', async () => {
    for (const bad of ['not-an-email', 'a@', '@example.test', 'two words@example.test', '', `${'a'.repeat(250)}@example.test`]) {
      const body = expectError(await register({ email: bad, password: TEST_PASSWORD }), 400, 'validation_failed');
      expect(body.error, bad).toContain('email');
    }
  });

  it('answers 400 for a weak password with the policy in the hint', async () => {
    const address = email();
    for (const weak of ['short', 'aaaaaaaaaaaaaaa', 'abababababab', '1234567890', 'Password123', address, 'x'.repeat(5) + 'y'.repeat(196) + 'abc']) {
      const body = expectError(await register({ email: address, password: weak }), 400, 'validation_failed');
      expect(body.hint, weak).toMatch(/10 to 200 characters/);
    }
    const [row] = await app.deps.sql<{ n: number }[]>`select count(*)::int as n from accounts where lower(email) = lower(${address})`;
    expect(row?.n).toBe(0);
  });

  it('answers 400 for missing fields, wrong types, unknown fields, a missing body and invalid JSON', async () => {
    expectError(await register({ email: email() }), 400, 'validation_failed');
    expectError(await register({ password: TEST_PASSWORD }), 400, 'validation_failed');
    expectError(await register({ email: 42, password: TEST_PASSWORD }), 400, 'validation_failed');
    expectError(await register({ email: email(), password: TEST_PASSWORD, admin: true }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'POST', url: '/api/v1/register' }), 400, 'body_missing');
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/register', headers: { 'content-type': 'application/json' }, payload: '{"email":' }),
      400,
      'invalid_json',
    );
  });

  it('never echoes the password in an error', async () => {
    const res = await register({ email: 'nope', password: 'hunter2-secret-value' });
    expect(res.body).not.toContain('hunter2-secret-value');
  });
});
