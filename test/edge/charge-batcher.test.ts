import type postgres from 'postgres';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ChargeBatcher } from '#core/billing';
import { getBalance } from '#db/ledger';
import { createSql } from '#db/sql';
import { createTestAccount, type TestAccount } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/settings.js';

const sql = createSql(testDatabaseUrl(), { max: 20 });
afterAll(async () => sql.end());
const log = pino({ level: 'silent' });

async function ledgerState(accountId: string) {
  const [row] = await sql<{ sum: bigint; charges: number }[]>`
    select coalesce(sum(amount_micros), 0)::bigint as sum, count(*) filter (where kind = 'charge')::int as charges
      from ledger_entries where account_id = ${accountId}`;
  return row!;
}

/** Fires `perAccount` charges of `cost` at every account at once, interleaved across accounts. */
function burst(batcher: ChargeBatcher, accounts: TestAccount[], perAccount: number, cost: bigint) {
  return Promise.all(
    Array.from({ length: perAccount }, () =>
      accounts.map((a) => batcher.charge({ accountId: a.accountId, keyId: a.keyId, costMicros: cost, item: 'proxy', apiId: 'batch-test' })),
    ).flat(),
  );
}

/**
 * Runs `work` in a transaction of its own and keeps it open (holding whatever row locks `work` took)
 * until `release()`; resolves `locked` once `work` is done.
 */
async function holdTransaction(work: (tx: postgres.TransactionSql<{ bigint: bigint }>) => Promise<unknown>) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const done = sql.begin(async (tx) => {
    await work(tx);
    locked();
    await held;
  });
  await isLocked;
  return { release, done };
}

describe('charge batcher (group commit)', () => {
  it('commits concurrent charges in shared statements, never overdrawing an account or losing a charge', async () => {
    // Each account can afford 7 of its 10 charges.
    const accounts = await Promise.all(Array.from({ length: 30 }, () => createTestAccount(sql, { balanceMicros: 7_000n })));
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 2, log });
    const results = await burst(batcher, accounts, 10, 1_000n);
    expect(results.filter((r) => r.ok)).toHaveLength(30 * 7);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.reason === 'insufficient_balance' && r.balanceMicros === 0n)).toBe(true);
    for (const account of accounts) {
      expect(await getBalance(sql, account.accountId)).toBe(0n);
      expect(await ledgerState(account.accountId)).toEqual({ sum: 0n, charges: 7 });
    }
    // Charge ids are distinct: no charge was answered twice.
    const ids = results.flatMap((r) => (r.ok ? [r.chargeId] : []));
    expect(new Set(ids).size).toBe(ids.length);
    // 300 charges went out in far fewer statements, each holding an account at most once.
    expect(batcher.stats.charges).toBe(300);
    expect(batcher.stats.largestBatch).toBeGreaterThan(1);
    expect(batcher.stats.largestBatch).toBeLessThanOrEqual(30);
    expect(batcher.stats.statements).toBeLessThan(300);
  });

  it('lets two edges batch overlapping accounts at once, in opposite orders, without deadlocks or lost charges', async () => {
    const accounts = await Promise.all(Array.from({ length: 30 }, () => createTestAccount(sql, { balanceMicros: 1_000_000n })));
    const edges = [0, 1].map(() => new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 4, log }));
    // Accounts 0-19 on one edge, 29-10 (reversed) on the other: rows are locked in id order whatever the plan.
    const [a, b] = await Promise.all([burst(edges[0]!, accounts.slice(0, 20), 15, 100n), burst(edges[1]!, accounts.slice(10).reverse(), 15, 100n)]);
    expect([...a!, ...b!].every((r) => r.ok)).toBe(true);
    expect(edges.reduce((n, e) => n + e.stats.refusedBatches, 0)).toBe(0);
    for (const [i, account] of accounts.entries()) {
      const charges = i >= 10 && i < 20 ? 30 : 15;
      expect(await getBalance(sql, account.accountId)).toBe(1_000_000n - BigInt(charges) * 100n);
      expect(await ledgerState(account.accountId)).toEqual({ sum: 1_000_000n - BigInt(charges) * 100n, charges });
    }
  });

  it('counts a top-up that commits while a batch waits for the row lock', async () => {
    const [empty, other] = await Promise.all([createTestAccount(sql, { balanceMicros: 0n }), createTestAccount(sql, { balanceMicros: 10_000n })]);
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 1, log });
    // Another transaction holds the empty account's row and credits it; the batch starts meanwhile.
    const topUp = await holdTransaction(async (tx) => {
      await tx`update accounts set balance_micros = balance_micros + 5000 where id = ${empty.accountId}`;
      await tx`insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros) values (${empty.accountId}, 'topup', 5000, 5000)`;
    });
    const charges = Promise.all([empty, other].map((a) => batcher.charge({ accountId: a.accountId, costMicros: 2_000n, item: 'proxy' })));
    await new Promise((resolve) => setTimeout(resolve, 300)); // the batch is now waiting for the lock
    topUp.release();
    await topUp.done;
    const [fromTopUp, fromOther] = await charges;
    expect(fromTopUp).toMatchObject({ ok: true, balanceMicros: 3_000n });
    expect(fromOther).toMatchObject({ ok: true, balanceMicros: 8_000n });
    expect(await ledgerState(empty.accountId)).toEqual({ sum: 3_000n, charges: 1 });
  });

  it('keeps an account in one statement at a time, so its locked row does not hold up the next batch', async () => {
    const [busy, free] = await Promise.all([createTestAccount(sql, { balanceMicros: 10_000n }), createTestAccount(sql, { balanceMicros: 10_000n })]);
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 4, log });
    const holder = await holdTransaction((tx) => tx`select id from accounts where id = ${busy.accountId} for update`);
    // Two charges of the busy account: the first waits for the lock, the second waits in the queue.
    const busyCharges = Promise.all([0, 1].map(() => batcher.charge({ accountId: busy.accountId, costMicros: 1_000n, item: 'proxy' })));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The next batch holds only the free account, and commits while the busy row is still locked.
    const freeCharge = await batcher.charge({ accountId: free.accountId, costMicros: 1_000n, item: 'proxy' });
    expect(freeCharge).toMatchObject({ ok: true, balanceMicros: 9_000n });
    expect(batcher.waiting).toBe(1);
    holder.release();
    await holder.done;
    expect((await busyCharges).map((r) => r.ok)).toEqual([true, true]);
    expect(await getBalance(sql, busy.accountId)).toBe(8_000n);
  });

  it('refuses a negative cost before queueing it, leaving the other charges of the turn alone', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 10_000n });
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 1, log });
    const [bad, good] = await Promise.allSettled([
      batcher.charge({ accountId: account.accountId, costMicros: -1n, item: 'proxy' }),
      batcher.charge({ accountId: account.accountId, costMicros: 1_000n, item: 'proxy' }),
    ]);
    expect(bad).toMatchObject({ status: 'rejected', reason: expect.any(RangeError) });
    expect(good).toMatchObject({ status: 'fulfilled', value: { ok: true, balanceMicros: 9_000n } });
  });

  it('retries each charge of a batch Postgres refused on its own, so one bad charge fails alone', async () => {
    const accounts = await Promise.all(Array.from({ length: 5 }, () => createTestAccount(sql, { balanceMicros: 10_000n })));
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 1, log });
    const results = await Promise.allSettled(
      accounts.map((a, i) =>
        // A NUL character is refused by Postgres in text: the whole batch statement fails.
        batcher.charge({ accountId: a.accountId, costMicros: 1_000n, item: 'proxy', description: i === 2 ? 'bad \u0000 byte' : 'GET /' }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(batcher.stats.refusedBatches).toBe(1);
    for (const [i, account] of accounts.entries()) {
      const expected = i === 2 ? 10_000n : 9_000n;
      expect(await getBalance(sql, account.accountId)).toBe(expected);
      expect((await ledgerState(account.accountId)).sum).toBe(expected);
    }
  });

  it('fails only the charge of an account that no longer exists', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 10_000n });
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 1, log });
    const [gone, kept] = await Promise.allSettled([
      batcher.charge({ accountId: '00000000-0000-4000-8000-000000000001', costMicros: 1_000n, item: 'proxy' }),
      batcher.charge({ accountId: account.accountId, costMicros: 1_000n, item: 'proxy' }),
    ]);
    expect(gone!.status).toBe('rejected');
    expect(kept).toMatchObject({ status: 'fulfilled', value: { ok: true, balanceMicros: 9_000n } });
  });

  it('charges each call alone with CHARGE_BATCH_MAX=1, and keeps spend-limited agent keys on their own transaction', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 100_000n });
    const single = new ChargeBatcher(sql, { maxBatch: 1, maxInFlight: 4, log });
    const results = await Promise.all(
      Array.from({ length: 5 }, () => single.charge({ accountId: account.accountId, costMicros: 1_000n, item: 'proxy' })),
    );
    expect(results.every((r) => r.ok)).toBe(true);
    expect(single.stats.statements).toBe(0);

    const agent = await createTestAccount(sql, { balanceMicros: 100_000n, keyKind: 'agent' });
    await sql`update api_keys set spend_limit_micros = 2000 where id = ${agent.keyId}`;
    const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 4, log });
    const limited = await Promise.all(
      Array.from({ length: 4 }, () =>
        batcher.charge({ accountId: agent.accountId, keyId: agent.keyId, spendLimited: true, costMicros: 1_000n, item: 'proxy' }),
      ),
    );
    expect(limited.filter((r) => r.ok)).toHaveLength(2);
    expect(limited.find((r) => !r.ok)).toMatchObject({ reason: 'spend_limit_exceeded' });
    expect(batcher.stats.statements).toBe(0);
  });
});
