import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

describe('balance and sandbox top-ups', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    app = await createTestApp({ BILLING_MODE: 'sandbox', SANDBOX_BALANCE_CAP_DOLLARS: '100' });
  });
  afterAll(async () => app.close());

  const topUp = (key: string, body: unknown, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url: '/api/v1/balance', headers: { ...bearer(key), ...headers }, payload: body as object });
  const ledgerSum = async (accountId: string) => {
    const [row] = await app.deps.sql<{ sum: bigint; balance: bigint }[]>`
      select coalesce((select sum(amount_micros) from ledger_entries where account_id = ${accountId}), 0)::bigint as sum,
             (select balance_micros from accounts where id = ${accountId}) as balance`;
    return row!;
  };

  it('reads the balance in dollars', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_500_000n });
    const body = expectOk<{ balance: number }>(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(account.fullKey) }));
    expect(body.balance).toBe(1.5);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/balance' }), 401, 'missing_credentials');
  });

  it('tops up in sandbox mode and the ledger agrees', async () => {
    const account = await createTestAccount(app.deps.sql, { balanceMicros: 250_000n });
    const body = expectOk<{ balance: number; credited: number }>(await topUp(account.fullKey, { amount: 12.5 }));
    expect(body).toMatchObject({ balance: 12.75, credited: 12.5 });
    expectOk(await topUp(account.fullKey, { amount: '0.000001' }));
    const { sum, balance } = await ledgerSum(account.accountId);
    expect(balance).toBe(12_750_001n);
    expect(sum).toBe(balance);
  });

  it('refuses bad amounts with 400 and credits nothing', async () => {
    const account = await createTestAccount(app.deps.sql);
    for (const amount of [-5, 0, '0', 'ten', '1e3', 1e-7, '0.0000001', 0.1 + 0.2, 1e21, '9999999999999', null, true, [5], { v: 5 }, '', ' ', '-1']) {
      const res = await topUp(account.fullKey, { amount });
      expectError(res, 400);
    }
    expectError(await topUp(account.fullKey, {}), 400, 'validation_failed');
    expectError(
      await app.inject({
        method: 'POST',
        url: '/api/v1/balance',
        headers: { ...bearer(account.fullKey), 'content-type': 'application/json' },
        payload: '{"amount":',
      }),
      400,
      'invalid_json',
    );
    expectError(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey) }), 400, 'body_missing');
    expect((await ledgerSum(account.accountId)).balance).toBe(0n);
  });

  it('keeps the sandbox balance under the cap', async () => {
    const account = await createTestAccount(app.deps.sql);
    expectError(await topUp(account.fullKey, { amount: 101 }), 400, 'validation_failed');
    expectOk(await topUp(account.fullKey, { amount: 90 }));
    const over = expectError(await topUp(account.fullKey, { amount: 20 }), 409, 'balance_cap_exceeded');
    expect(over.hint).toContain('$10');
    expectOk(await topUp(account.fullKey, { amount: 10 }));
    expect((await ledgerSum(account.accountId)).balance).toBe(100_000_000n);
  });

  it('never passes the cap under concurrent top-ups', async () => {
    const account = await createTestAccount(app.deps.sql);
    const results = await Promise.all(Array.from({ length: 30 }, () => topUp(account.fullKey, { amount: 7 })));
    const ok = results.filter((r) => r.statusCode === 200).length;
    expect(ok).toBe(14);
    expect(results.filter((r) => r.statusCode === 409).length).toBe(16);
    const { sum, balance } = await ledgerSum(account.accountId);
    expect(balance).toBe(98_000_000n);
    expect(sum).toBe(balance);
  });

  it('honors Idempotency-Key: a replay returns the first result; another amount is a 409', async () => {
    const account = await createTestAccount(app.deps.sql);
    const key = uniqueId('idem-');
    const first = expectOk<{ balance: number; credited: number }>(await topUp(account.fullKey, { amount: 5 }, { 'idempotency-key': key }));
    expectOk(await topUp(account.fullKey, { amount: 1 }));
    const replay = await topUp(account.fullKey, { amount: 5 }, { 'idempotency-key': key });
    expect(expectOk(replay)).toEqual(first);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expectError(await topUp(account.fullKey, { amount: 6 }, { 'idempotency-key': key }), 409, 'idempotency_conflict');
    const racing = await Promise.all(Array.from({ length: 10 }, () => topUp(account.fullKey, { amount: 2 }, { 'idempotency-key': `${key}-race` })));
    for (const res of racing) expectOk(res);
    expect((await ledgerSum(account.accountId)).balance).toBe(8_000_000n);
    expectError(await topUp(account.fullKey, { amount: 1 }, { 'idempotency-key': 'has space' }), 400, 'validation_failed');
  });

  it('refuses agent keys with 403', async () => {
    const agent = await createTestAccount(app.deps.sql, { keyKind: 'agent' });
    expectError(await topUp(agent.fullKey, { amount: 5 }), 403, 'agent_key_forbidden');
    expectOk(await app.inject({ method: 'GET', url: '/api/v1/balance', headers: bearer(agent.fullKey) }));
  });

  it('answers 403 live_billing with a hint in live mode', async () => {
    const live = await createTestApp({ BILLING_MODE: 'live' });
    try {
      const account = await createTestAccount(live.deps.sql);
      const body = expectError(
        await live.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 5 } }),
        403,
        'live_billing',
      );
      expect(body.hint).toBeTruthy();
    } finally {
      await live.close();
    }
  });
});
