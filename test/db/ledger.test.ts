import { afterAll, describe, expect, it } from 'vitest';
import { charge, chargeBatch, credit, getBalance, refund } from '#db/ledger';
import { createSql } from '#db/sql';
import { createTestAccount } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/settings.js';

const sql = createSql(testDatabaseUrl(), { max: 20 });
afterAll(async () => sql.end());

async function ledgerSum(accountId: string): Promise<bigint> {
  const [row] = await sql<
    { sum: bigint }[]
  >`select coalesce(sum(amount_micros), 0)::bigint as sum from ledger_entries where account_id = ${accountId}`;
  return row!.sum;
}

describe('ledger', () => {
  it('never overdraws under concurrent charges and loses none', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 50_000n });
    const results = await Promise.all(
      Array.from({ length: 40 }, () => charge(sql, { accountId: account.accountId, costMicros: 7_000n, item: 'test', keyId: account.keyId })),
    );
    const succeeded = results.filter((r) => r.ok).length;
    expect(succeeded).toBe(7); // 7 * 7000 = 49000 <= 50000 < 56000
    expect(await getBalance(sql, account.accountId)).toBe(1_000n);
    expect(await ledgerSum(account.accountId)).toBe(1_000n);
    const refused = results.find((r) => !r.ok);
    expect(refused).toMatchObject({ ok: false, reason: 'insufficient_balance', costMicros: 7_000n });
  });

  it('refunds a charge exactly once, even when refunds race', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 10_000n });
    const charged = await charge(sql, { accountId: account.accountId, costMicros: 4_000n, item: 'test' });
    if (!charged.ok) throw new Error('charge failed');
    const refunds = await Promise.all(Array.from({ length: 5 }, () => refund(sql, charged.chargeId)));
    expect(new Set(refunds.map((r) => r.refundId)).size).toBe(1);
    expect(await getBalance(sql, account.accountId)).toBe(10_000n);
    expect(await ledgerSum(account.accountId)).toBe(10_000n);
  });

  it('credits once per idempotency key, even when credits race', async () => {
    const account = await createTestAccount(sql);
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        credit(sql, { accountId: account.accountId, amountMicros: 2_500_000n, kind: 'topup', idempotencyKey: 'same-key' }),
      ),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.entryId)).size).toBe(1);
    expect(await getBalance(sql, account.accountId)).toBe(2_500_000n);
  });

  it('keeps an agent key within its spend limit atomically with the charge', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n, keyKind: 'agent' });
    await sql`update api_keys set spend_limit_micros = 30000 where id = ${account.keyId}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        charge(sql, { accountId: account.accountId, costMicros: 10_000n, keyId: account.keyId, spendLimited: true, item: 'test' }),
      ),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    expect(results.find((r) => !r.ok)).toMatchObject({ reason: 'spend_limit_exceeded', spendLimitMicros: 30_000n });
    const [key] = await sql<{ spent_micros: bigint }[]>`select spent_micros from api_keys where id = ${account.keyId}`;
    expect(key!.spent_micros).toBe(30_000n);
    expect(await getBalance(sql, account.accountId)).toBe(970_000n);
  });

  it('charges several accounts in one statement, each by the single-charge rule, answering in order', async () => {
    const rich = await createTestAccount(sql, { balanceMicros: 100_000n });
    const poor = await createTestAccount(sql, { balanceMicros: 3_000n });
    const exact = await createTestAccount(sql, { balanceMicros: 5_000n });
    const results = await chargeBatch(sql, [
      { accountId: rich.accountId, costMicros: 5_000n, keyId: rich.keyId, apiId: 'a', item: 'proxy', description: 'GET /x "q" {a,b} NULL' },
      { accountId: poor.accountId, costMicros: 5_000n, keyId: poor.keyId, apiId: 'a', item: 'proxy' },
      { accountId: exact.accountId, costMicros: 5_000n, keyId: null, apiId: null, item: 'doc', description: null },
    ]);
    expect(results[0]).toMatchObject({ ok: true, balanceMicros: 95_000n, costMicros: 5_000n });
    expect(results[1]).toEqual({ ok: false, reason: 'insufficient_balance', balanceMicros: 3_000n, costMicros: 5_000n });
    expect(results[2]).toMatchObject({ ok: true, balanceMicros: 0n });
    for (const [account, balance] of [
      [rich, 95_000n],
      [poor, 3_000n],
      [exact, 0n],
    ] as const) {
      expect(await getBalance(sql, account.accountId)).toBe(balance);
      expect(await ledgerSum(account.accountId)).toBe(balance);
    }
    const [row] = await sql<{ key_id: string; api_id: string; item: string; description: string; amount_micros: bigint }[]>`
      select key_id, api_id, item, description, amount_micros from ledger_entries where id = ${(results[0] as { chargeId: string }).chargeId}`;
    expect(row).toEqual({ key_id: rich.keyId, api_id: 'a', item: 'proxy', description: 'GET /x "q" {a,b} NULL', amount_micros: -5_000n });
  });

  it('answers null for an account that does not exist and charges the others of the batch', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 10_000n });
    const results = await chargeBatch(sql, [
      { accountId: '00000000-0000-4000-8000-000000000000', costMicros: 1_000n, item: 'test' },
      { accountId: account.accountId, costMicros: 1_000n, item: 'test' },
    ]);
    expect(results[0]).toBeNull();
    expect(results[1]).toMatchObject({ ok: true, balanceMicros: 9_000n });
  });

  it('refuses a batch holding an account twice, a spend-limited charge or a negative cost, before touching Postgres', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 10_000n });
    const one = { accountId: account.accountId, costMicros: 1_000n, item: 'test' };
    await expect(chargeBatch(sql, [one, one])).rejects.toThrow(/at most once/);
    await expect(chargeBatch(sql, [one, { ...one, accountId: one.accountId.toUpperCase() }])).rejects.toThrow(/at most once/);
    await expect(chargeBatch(sql, [{ ...one, keyId: account.keyId, spendLimited: true }])).rejects.toThrow(/spend-limited/);
    await expect(chargeBatch(sql, [{ ...one, costMicros: -1n }])).rejects.toThrow(/negative/);
    expect(await getBalance(sql, account.accountId)).toBe(10_000n);
  });
});
