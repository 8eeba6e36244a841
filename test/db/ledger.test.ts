import { afterAll, describe, expect, it } from 'vitest';
import { charge, credit, getBalance, refund } from '../../db/src/ledger.js';
import { createSql } from '../../db/src/sql.js';
import { createTestAccount } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/settings.js';

const sql = createSql(testDatabaseUrl(), { max: 20 });
afterAll(async () => sql.end());

async function ledgerSum(accountId: string): Promise<bigint> {
  const [row] = await sql<{ sum: bigint }[]>`select coalesce(sum(amount_micros), 0)::bigint as sum from ledger_entries where account_id = ${accountId}`;
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
      Array.from({ length: 6 }, () => credit(sql, { accountId: account.accountId, amountMicros: 2_500_000n, kind: 'topup', idempotencyKey: 'same-key' })),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.entryId)).size).toBe(1);
    expect(await getBalance(sql, account.accountId)).toBe(2_500_000n);
  });

  it('keeps an agent key within its spend limit atomically with the charge', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n, keyKind: 'agent' });
    await sql`update api_keys set spend_limit_micros = 30000 where id = ${account.keyId}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => charge(sql, { accountId: account.accountId, costMicros: 10_000n, keyId: account.keyId, spendLimited: true, item: 'test' })),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    expect(results.find((r) => !r.ok)).toMatchObject({ reason: 'spend_limit_exceeded', spendLimitMicros: 30_000n });
    const [key] = await sql<{ spent_micros: bigint }[]>`select spent_micros from api_keys where id = ${account.keyId}`;
    expect(key!.spent_micros).toBe(30_000n);
    expect(await getBalance(sql, account.accountId)).toBe(970_000n);
  });
});
