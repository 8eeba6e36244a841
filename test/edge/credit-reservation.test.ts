import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ChargeBatcher, CreditReservations, type CreditReservationOptions } from '#core/billing';
import { reserveCredit, settleExpiredHolds, settleHolds, type HeldCharge } from '#db/credit-holds';
import { clawback, getBalance, getSpendable, type ChargeResult } from '#db/ledger';
import { recordUsageEvents } from '#db/usage';
import { createSql } from '#db/sql';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';
import { registerApi, startUpstream } from '../helpers/upstream.js';
import { Worker } from 'bullmq';
import { createRedis } from '#core/platform';
import { usageProcessor } from '#workers/queues/usage';

const sql = createSql(testDatabaseUrl(), { max: 20 });
afterAll(async () => sql.end());
const log = pino({ level: 'silent' });

const options: CreditReservationOptions = {
  enabled: true,
  minCallsPerSecond: 1,
  sliceSeconds: 1,
  floorMicros: 10_000n,
  ceilingMicros: 1_000_000n,
  settleEveryMs: 50,
  holdTtlSeconds: 30,
  idleMs: 60_000,
  log,
};

function edge(overrides: Partial<CreditReservationOptions> = {}) {
  const batcher = new ChargeBatcher(sql, { maxBatch: 64, maxInFlight: 2, log });
  return new CreditReservations(sql, batcher, { ...options, ...overrides });
}

const call = (account: TestAccount, costMicros: bigint) => ({
  accountId: account.accountId,
  keyId: account.keyId,
  costMicros,
  item: 'proxy',
  apiId: 'hold-test',
  description: 'GET /',
});

/** The account's ledger: sum of entries, charge rows, and what holds keep. */
async function ledger(accountId: string) {
  const [row] = await sql<{ sum: bigint; charges: number; balance: bigint; held: bigint; open: number }[]>`
    select (select coalesce(sum(amount_micros), 0)::bigint from ledger_entries where account_id = a.id) as sum,
           (select count(*)::int from ledger_entries where account_id = a.id and kind = 'charge') as charges,
           a.balance_micros as balance, a.held_micros as held,
           (select count(*)::int from credit_holds where account_id = a.id and closed_at is null) as open
      from accounts a where a.id = ${accountId}`;
  return row!;
}

/** The usage events of answered calls charged from holds, as the edge hands them to the queue. */
const recordHeldUsage = (calls: { accountId: string; keyId: string | null; chargeId: string; holdId: string; costMicros: bigint }[]) => {
  const at = new Date().toISOString();
  return recordUsageEvents(
    sql,
    calls.map((c) => ({
      id: crypto.randomUUID(),
      accountId: c.accountId,
      keyId: c.keyId,
      apiId: 'hold-test',
      item: 'proxy',
      status: 200,
      latencyMs: 1,
      bytesIn: 0,
      bytesOut: 10,
      costMicros: c.costMicros.toString(),
      chargeId: c.chargeId,
      holdId: c.holdId,
      at,
    })),
  );
};

const okIds = (results: ChargeResult[]) => results.flatMap((r) => (r.ok ? [r.chargeId] : []));

describe('credit reservation', () => {
  it('charges a busy account from a hold, writes every call to the ledger once, and returns what is left when closed', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const reservations = edge();
    const results: ChargeResult[] = [];
    for (let i = 0; i < 200; i += 1) results.push(await reservations.charge(call(account, 100n)));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(reservations.stats.held).toBeGreaterThan(150);
    // Grants are few: one statement per slice, not per call.
    expect(reservations.stats.grants).toBeLessThan(10);
    // While held, the money is out of reach of anyone else but still in the balance.
    const during = await ledger(account.accountId);
    expect(during.held).toBeGreaterThan(0n);
    expect(during.balance - during.held).toBeLessThanOrEqual(1_000_000n - 200n * 100n);

    await reservations.close();
    const after = await ledger(account.accountId);
    expect(after).toEqual({ sum: 1_000_000n - 20_000n, charges: 200, balance: 1_000_000n - 20_000n, held: 0n, open: 0 });
    // The ids the callers were given are the ledger rows' ids.
    const ids = okIds(results);
    const [rows] = await sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where id = any(${ids}::uuid[]) and kind = 'charge'`;
    expect(rows!.n).toBe(200);
    expect(new Set(ids).size).toBe(200);
  });

  it('never overdraws: concurrent calls beyond the balance get 402 from the synchronous charge, with the real balance', async () => {
    // 10,050 micro-dollars buys 100 calls of 100; the floor-sized hold (10,000) cannot cover them all.
    const account = await createTestAccount(sql, { balanceMicros: 10_050n });
    const reservations = edge();
    const results = await Promise.all(Array.from({ length: 150 }, () => reservations.charge(call(account, 100n))));
    const ok = results.filter((r) => r.ok);
    expect(ok).toHaveLength(100);
    const refused = results.filter((r) => !r.ok);
    expect(refused.every((r) => !r.ok && r.reason === 'insufficient_balance' && r.balanceMicros === 50n)).toBe(true);
    await reservations.close();
    expect(await ledger(account.accountId)).toEqual({ sum: 50n, charges: 100, balance: 50n, held: 0n, open: 0 });
  });

  it('two edges on one account never spend more than it has, and a spent balance stops both within a second', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 50_000n });
    const a = edge();
    const b = edge();
    let okCount = 0;
    const refusedAt = { a: 0, b: 0 };
    const started = Date.now();
    // Both edges call as fast as they can until each is refused.
    await Promise.all(
      (['a', 'b'] as const).map(async (name) => {
        const reservations = name === 'a' ? a : b;
        for (;;) {
          const result = await reservations.charge(call(account, 100n));
          if (!result.ok) {
            refusedAt[name] = Date.now() - started;
            return;
          }
          okCount += 1;
        }
      }),
    );
    await Promise.all([a.close(), b.close()]);
    const state = await ledger(account.accountId);
    expect(state.balance).toBeGreaterThanOrEqual(0n);
    expect(state).toEqual({ sum: 50_000n - BigInt(okCount) * 100n, charges: okCount, balance: 50_000n - BigInt(okCount) * 100n, held: 0n, open: 0 });
    // All of it was spent (what one edge held went back and the other could use it), to the last call.
    expect(state.balance).toBeLessThan(100n);
    // Once the money was gone, neither edge went on for more than a second.
    expect(Math.abs(refusedAt.a - refusedAt.b)).toBeLessThan(1_000);
  });

  it('settles calls whose refund comes later, so the refund finds its charge', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 100_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    const results: ChargeResult[] = [];
    for (let i = 0; i < 5; i += 1) results.push(await reservations.charge(call(account, 1_000n)));
    const last = results.at(-1)!;
    if (!last.ok || !('holdId' in last))
      throw new Error(`expected a charge from a hold, got ${JSON.stringify(last, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
    await reservations.recorded(last.chargeId);
    const [row] = await sql<
      { amount_micros: bigint; hold_id: string | null }[]
    >`select amount_micros, hold_id from ledger_entries where id = ${last.chargeId}`;
    expect(row).toEqual({ amount_micros: -1_000n, hold_id: last.holdId });
    await reservations.close();
  });

  it('keeps quiet accounts on the synchronous charge', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 100_000n });
    const reservations = edge({ minCallsPerSecond: 50 });
    for (let i = 0; i < 5; i += 1) expect((await reservations.charge(call(account, 1_000n))).ok).toBe(true);
    expect(reservations.stats.held).toBe(0);
    // Exact at every answer: the ledger already has all five.
    expect(await ledger(account.accountId)).toMatchObject({ charges: 5, balance: 95_000n, held: 0n, open: 0 });
    await reservations.close();
  });

  it("a grant that commits while a settlement's answer is on its way is not undone by that answer: a held call's balance stays the ledger's", async () => {
    // A settlement answers only after a statement that follows its commit (the holds' expiry). A
    // grant of the same account that commits in between must not be overtaken by the settlement's
    // older balance: applied after the grant, it would count the grant twice (in the hold and
    // outside it) and report more than the account has. The expiry statement is stalled here by a
    // trigger waiting on an advisory lock the test holds, so the grant has all the time it wants.
    const stall = 4_242_001;
    await sql.unsafe(`
      create or replace function test_stall_hold_expiry() returns trigger language plpgsql as $$
      begin
        if current_query() like '%credit_holds set expires_at = now() + make_interval%' then perform pg_advisory_xact_lock_shared(${stall}); end if;
        return null;
      end $$`);
    await sql.unsafe(
      'create trigger test_stall_hold_expiry before update on credit_holds for each statement execute function test_stall_hold_expiry()',
    );
    const blocker = await sql.reserve();
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    try {
      for (let i = 0; i < 5; i += 1) expect(await reservations.charge(call(account, 1_000n))).toMatchObject({ ok: true, holdId: expect.any(String) });
      await reservations.grantsInFlight();
      await blocker`select pg_advisory_lock(${stall})`;
      const settling = reservations.flush();
      await until('the settlement committed and waits on the expiry statement', async () => {
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and query like '%credit_holds set expires_at = now()%'`;
        return row!.n > 0;
      });
      // More than the hold has left: the call waits for a grant (which must not run beside the settlement).
      const before = { grants: reservations.stats.grants, waits: reservations.stats.balanceWaits };
      const big = reservations.charge(call(account, 20_000n));
      await until(
        'the grant ran, or waits for the settlement',
        () => reservations.stats.grants > before.grants || reservations.stats.balanceWaits > before.waits,
      );
      await blocker`select pg_advisory_unlock(${stall})`;
      await settling;
      expect(await big).toMatchObject({ ok: true, holdId: expect.any(String) });
      const next = await reservations.charge(call(account, 1_000n));
      expect(next).toMatchObject({ ok: true, holdId: expect.any(String) });
      await reservations.flush();
      const settled = await ledger(account.accountId);
      expect(settled).toMatchObject({ sum: 1_000_000n - 26_000n, charges: 7, balance: 1_000_000n - 26_000n });
      expect(next.balanceMicros).toBe(settled.balance);
    } finally {
      await blocker`select pg_advisory_unlock_all()`;
      blocker.release();
      await sql.unsafe('drop trigger if exists test_stall_hold_expiry on credit_holds');
      await sql.unsafe('drop function if exists test_stall_hold_expiry()');
      await reservations.close();
    }
  });

  it('synchronous charges beside an open hold (a spend-limited key) and calls from the hold, side by side, report what the ledger ends with', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    try {
      for (let i = 0; i < 5; i += 1) expect((await reservations.charge(call(account, 1_000n))).ok).toBe(true);
      // A third of them charged synchronously while the others' grants and the refunds' settlements run.
      const mixed = await Promise.all(
        Array.from({ length: 30 }, (_, i) => reservations.charge({ ...call(account, 1_000n), spendLimited: i % 3 === 0 })),
      );
      expect(mixed.every((r) => r.ok)).toBe(true);
      expect(mixed.filter((r) => r.ok && 'holdId' in r)).toHaveLength(20);
      const last = await reservations.charge({ ...call(account, 1_000n), spendLimited: true });
      await reservations.flush();
      const settled = await ledger(account.accountId);
      expect(settled).toMatchObject({ sum: 1_000_000n - 36_000n, charges: 36, balance: 1_000_000n - 36_000n });
      expect(last).toMatchObject({ ok: true, balanceMicros: settled.balance });
    } finally {
      await reservations.close();
    }
  });

  it('a crashed edge loses no money: its expired hold is charged for the calls its usage events name and the rest returned', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    const results: ChargeResult[] = [];
    for (let i = 0; i < 10; i += 1) results.push(await reservations.charge(call(account, 500n)));
    // The first 10 calls were settled before the crash; 20 more were answered, and the usage events
    // of 15 of them reached the queue before the edge died (5 were lost with it).
    await reservations.flush();
    for (let i = 0; i < 20; i += 1) results.push(await reservations.charge(call(account, 500n)));
    await reservations.grantsInFlight();
    const held = results.filter((r): r is Extract<ChargeResult, { ok: true }> & { holdId: string } => r.ok && 'holdId' in r);
    expect(held).toHaveLength(30);
    await recordHeldUsage(held.slice(0, 25).map((r) => ({ ...r, accountId: account.accountId, keyId: account.keyId, costMicros: 500n })));
    const before = await ledger(account.accountId);
    reservations.abandon();
    expect(before.held).toBeGreaterThan(0n);

    // Not yet expired: the recovery leaves a live edge's hold alone.
    expect(await settleExpiredHolds(sql, 0)).toMatchObject({ holds: 0 });
    await sql`update credit_holds set expires_at = now() - interval '1 minute' where account_id = ${account.accountId}`;
    const recovered = await settleExpiredHolds(sql, 30);
    expect(recovered.holds).toBeGreaterThanOrEqual(1);
    // Run twice: nothing more happens.
    await settleExpiredHolds(sql, 30);
    // The 25 calls with usage events are charged (10 by the edge, 15 by the recovery); the 5 whose
    // events died with the edge are the platform's loss, never the caller's.
    expect(await ledger(account.accountId)).toEqual({
      sum: 1_000_000n - 25n * 500n,
      charges: 25,
      balance: 1_000_000n - 25n * 500n,
      held: 0n,
      open: 0,
    });
  });

  it("an edge that stalled past its hold's expiry still pays for its calls from the balance", async () => {
    const account = await createTestAccount(sql, { balanceMicros: 100_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    const results: ChargeResult[] = [];
    for (let i = 0; i < 10; i += 1) results.push(await reservations.charge(call(account, 1_000n)));
    await reservations.grantsInFlight();
    // The recovery takes the edge for dead: nothing of its calls is in the usage events yet.
    await sql`update credit_holds set expires_at = now() - interval '1 minute' where account_id = ${account.accountId}`;
    await settleExpiredHolds(sql, 30);
    expect((await ledger(account.accountId)).held).toBe(0n);
    // The edge wakes up and settles: its calls are charged outside the hold, and it opens a new one.
    await reservations.flush();
    expect(await ledger(account.accountId)).toMatchObject({ sum: 90_000n, charges: 10, balance: 90_000n, held: 0n });
    expect((await reservations.charge(call(account, 1_000n))).ok).toBe(true);
    await reservations.close();
    expect(await ledger(account.accountId)).toEqual({ sum: 89_000n, charges: 11, balance: 89_000n, held: 0n, open: 0 });
    expect(await getBalance(sql, account.accountId)).toBe(89_000n);
    expect(await getSpendable(sql, account.accountId)).toBe(89_000n);
  });

  it('a clawback that lands while a hold is open does not stop its calls from settling: the account goes into debt', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 100_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    const results: ChargeResult[] = [];
    for (let i = 0; i < 10; i += 1) results.push(await reservations.charge(call(account, 5_000n)));
    await reservations.grantsInFlight();
    expect(results.every((r) => r.ok && 'holdId' in r)).toBe(true);
    // A disputed top-up takes back 90,000 of the 100,000 while the hold keeps 50,000 of calls unsettled.
    await clawback(sql, { accountId: account.accountId, amountMicros: 90_000n, description: 'dispute', idempotencyKey: uniqueId('clawback') });
    // What the hold still keeps may be spent (it was set aside before the clawback); nothing beyond it.
    for (let i = 0; i < 20; i += 1) results.push(await reservations.charge(call(account, 5_000n)));
    await reservations.close();
    const paid = BigInt(results.filter((r) => r.ok).length) * 5_000n;
    expect(paid).toBeLessThanOrEqual(100_000n);
    const after = await ledger(account.accountId);
    expect(after).toEqual({ sum: 100_000n - 90_000n - paid, charges: Number(paid / 5_000n), balance: 100_000n - 90_000n - paid, held: 0n, open: 0 });
    expect(after.balance).toBeLessThan(0n);
    const [flag] = await sql<{ clawback_debt: boolean }[]>`select clawback_debt from accounts where id = ${account.accountId}`;
    expect(flag!.clawback_debt).toBe(true);
  });

  it("the recovery of a crashed edge's hold settles its calls after a clawback too, and one hold that cannot settle does not stop the others", async () => {
    const indebted = await createTestAccount(sql, { balanceMicros: 100_000n });
    const other = await createTestAccount(sql, { balanceMicros: 100_000n });
    const reservations = edge({ settleEveryMs: 60_000 });
    const held: { chargeId: string; holdId: string; accountId: string }[] = [];
    for (const account of [indebted, other]) {
      for (let i = 0; i < 4; i += 1) {
        const r = await reservations.charge(call(account, 10_000n));
        if (r.ok && 'holdId' in r) held.push({ chargeId: r.chargeId, holdId: r.holdId as string, accountId: account.accountId });
      }
    }
    await reservations.grantsInFlight();
    expect(held).toHaveLength(8);
    await recordHeldUsage(held.map((r) => ({ ...r, keyId: null, costMicros: 10_000n })));
    reservations.abandon();
    await clawback(sql, { accountId: indebted.accountId, amountMicros: 95_000n, description: 'dispute', idempotencyKey: uniqueId('clawback') });
    await sql`update credit_holds set expires_at = now() - interval '1 minute' where account_id in (${indebted.accountId}, ${other.accountId})`;
    // A hold that cannot settle, first in line: it claims money its account never set aside, so
    // returning it would take held_micros below zero (a stand-in for any failure of one hold's
    // transaction). It must not keep the recovery from the holds after it.
    const stranger = await createTestAccount(sql, { balanceMicros: 0n });
    const [broken] = await sql<{ id: string }[]>`
      insert into credit_holds (account_id, edge_id, reserved_micros, expires_at)
      values (${stranger.accountId}, 'broken-edge', 1, now() - interval '1 hour') returning id`;
    const recovered = await settleExpiredHolds(sql, 30);
    expect(recovered.failed).toContain(broken!.id);
    expect(recovered.holds).toBeGreaterThanOrEqual(2);
    expect(await ledger(indebted.accountId)).toEqual({ sum: 100_000n - 95_000n - 40_000n, charges: 4, balance: -35_000n, held: 0n, open: 0 });
    expect(await ledger(other.accountId)).toMatchObject({ sum: 60_000n, charges: 4, balance: 60_000n });
    // The broken hold would fail every later recovery in this database (each reports it): removed.
    await sql`delete from credit_holds where id = ${broken!.id}`;
  });
});

/** A held call's charge as the edge hands it to a settlement. */
const heldCharge = (account: TestAccount, costMicros: bigint): HeldCharge => ({
  id: crypto.randomUUID(),
  costMicros,
  keyId: account.keyId,
  apiId: 'hold-test',
  item: 'proxy',
  description: 'GET /',
  at: new Date(),
});

/** Whether every ledger row's balance after it is the running sum of the account's rows, in the order written. */
async function runningBalancesHold(accountId: string): Promise<boolean> {
  const rows = await sql<{ amount: bigint; after: bigint }[]>`
    select amount_micros as amount, balance_after_micros as after from ledger_entries where account_id = ${accountId} order by seq`;
  let running = 0n;
  return rows.every((row) => (running += row.amount) === row.after);
}

describe('settling credit holds (db/src/credit-holds.ts)', () => {
  const edgeId = () => uniqueId('edge');
  const hold = async (account: TestAccount, edge: string, holdId: string | null = null) => {
    const grant = await reserveCredit(sql, {
      accountId: account.accountId,
      edgeId: edge,
      holdId,
      wantMicros: 100_000n,
      needMicros: 1n,
      ttlSeconds: 30,
    });
    if (!grant.ok) throw new Error('no grant');
    return grant.holdId;
  };

  it('a settlement retried with calls taken since writes only the new rows, and every balance after a row runs on from the rows before it', async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const edge = edgeId();
    const holdId = await hold(account, edge);
    const first = [heldCharge(account, 1_000n), heldCharge(account, 1_000n), heldCharge(account, 1_000n)];
    const item = (charges: HeldCharge[]) => ({ holdId, accountId: account.accountId, charges, releasedMicros: 0n, close: false });
    await settleHolds(sql, edge, [item(first)], 30);
    // The edge did not hear that the first settlement committed: it sends those calls again, with two taken since.
    const later = [heldCharge(account, 2_000n), heldCharge(account, 2_000n)];
    const [settled] = await settleHolds(sql, edge, [item([...first, ...later])], 30);
    expect(settled).toMatchObject({ open: true, balanceMicros: 993_000n, availableMicros: 900_000n, unpaid: [] });
    expect(await ledger(account.accountId)).toMatchObject({ sum: 993_000n, charges: 5, balance: 993_000n, held: 93_000n, open: 1 });
    const [row] = await sql<{ charged: bigint }[]>`select charged_micros as charged from credit_holds where id = ${holdId}`;
    expect(row!.charged).toBe(7_000n);
    expect(await runningBalancesHold(account.accountId)).toBe(true);
    // Once more, unchanged: nothing moves.
    await settleHolds(sql, edge, [item([...first, ...later])], 30);
    expect(await ledger(account.accountId)).toMatchObject({ sum: 993_000n, charges: 5, balance: 993_000n, held: 93_000n });
  });

  it('settles many holds of several accounts in one go, a hold closed under the edge among them, each account to the micro-dollar', async () => {
    const edge = edgeId();
    const accounts = await Promise.all([0, 1, 2].map(() => createTestAccount(sql, { balanceMicros: 1_000_000n })));
    const holds = await Promise.all(accounts.map((a) => hold(a, edge)));
    // The first account's hold was closed under the edge (its calls go outside any hold) and the edge took a new one.
    const [first] = accounts;
    await sql`update credit_holds set closed_at = now(), released_micros = reserved_micros where id = ${holds[0]!}`;
    await sql`update accounts set held_micros = held_micros - 100000 where id = ${first!.accountId}`;
    const renewed = await hold(first!, edge);
    const items = [
      { holdId: holds[0]!, accountId: first!.accountId, charges: [heldCharge(first!, 500n)], releasedMicros: 0n, close: false },
      {
        holdId: renewed,
        accountId: first!.accountId,
        charges: [heldCharge(first!, 1_000n), heldCharge(first!, 1_000n)],
        releasedMicros: 0n,
        close: false,
      },
      { holdId: holds[1]!, accountId: accounts[1]!.accountId, charges: [heldCharge(accounts[1]!, 3_000n)], releasedMicros: 40_000n, close: false },
      { holdId: holds[2]!, accountId: accounts[2]!.accountId, charges: [heldCharge(accounts[2]!, 4_000n)], releasedMicros: 0n, close: true },
    ];
    const results = await settleHolds(sql, edge, items, 30);
    expect(results.map((r) => [r.holdId, r.open, r.balanceMicros, r.availableMicros])).toEqual([
      [holds[0], false, 999_500n, 899_500n],
      [renewed, true, 997_500n, 899_500n],
      [holds[1], true, 997_000n, 940_000n],
      [holds[2], true, 996_000n, 996_000n],
    ]);
    expect(await ledger(first!.accountId)).toMatchObject({ sum: 997_500n, charges: 3, balance: 997_500n, held: 98_000n, open: 1 });
    expect(await ledger(accounts[1]!.accountId)).toMatchObject({ sum: 997_000n, charges: 1, balance: 997_000n, held: 57_000n, open: 1 });
    expect(await ledger(accounts[2]!.accountId)).toMatchObject({ sum: 996_000n, charges: 1, balance: 996_000n, held: 0n, open: 0 });
    for (const account of accounts) expect(await runningBalancesHold(account.accountId)).toBe(true);
  });

  it("pushes a live edge's holds' expiry forward only once a quarter of their lifetime is gone, so a settlement rarely rewrites a hold's indexed expiry", async () => {
    const account = await createTestAccount(sql, { balanceMicros: 1_000_000n });
    const edge = edgeId();
    const holdId = await hold(account, edge);
    const expiry = async () =>
      (await sql<{ left: number }[]>`select extract(epoch from expires_at - now())::float8 as left from credit_holds where id = ${holdId}`)[0]!.left;
    const item = { holdId, accountId: account.accountId, charges: [heldCharge(account, 1_000n)], releasedMicros: 0n, close: false };
    // Fresh (30 s left): neither a settlement nor a further grant rewrites it.
    await sql`update credit_holds set expires_at = now() + interval '25 seconds' where id = ${holdId}`;
    await settleHolds(sql, edge, [item], 30);
    await hold(account, edge, holdId);
    expect(await expiry()).toBeLessThan(25.5);
    // Under three quarters of the 30 s left: the next settlement pushes it to 30 s again.
    await sql`update credit_holds set expires_at = now() + interval '20 seconds' where id = ${holdId}`;
    await settleHolds(sql, edge, [], 30);
    expect(await expiry()).toBeGreaterThan(27);
    // And so does a grant.
    await sql`update credit_holds set expires_at = now() + interval '20 seconds' where id = ${holdId}`;
    await hold(account, edge, holdId);
    expect(await expiry()).toBeGreaterThan(27);
  });
});

describe('credit reservation in the edge', () => {
  it('forwards no call unpaid, and every call is in the ledger and in usage once, also when the edge shuts down holding money', async () => {
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    const prefix = uniqueId('holds');
    const app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: prefix,
      CREDIT_HOLD_MIN_CALLS_PER_SECOND: '1',
      CREDIT_HOLD_SETTLE_MS: '10000',
      USAGE_FLUSH_MS: '50',
    });
    // The usage worker, as the queue workers run it: with a Postgres pool of its own, since the edge's
    // pool ends with app.close() below while the worker may still have batches to write.
    const workerRedis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    const definition = usageProcessor({ sql });
    const worker = new Worker(definition.job.queue, definition.process, { connection: workerRedis, prefix });
    try {
      const apiId = await registerApi({ baseUrl: upstream.url, price: '0.001' });
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
      const answers = [];
      for (let i = 0; i < 40; i += 1) {
        const res = await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/items/${i}`, headers: { 'x-api-key': account.fullKey } });
        answers.push({ status: res.statusCode, chargeId: res.headers['x-service-charge-id'], balance: res.headers['x-service-balance'] });
      }
      expect(answers.every((a) => a.status === 200)).toBe(true);
      expect(upstream.seen).toHaveLength(40);
      // What the caller can still spend, to the micro-dollar: nothing else spends from this account.
      expect(answers.at(-1)!.balance).toBe('0.96');
      // Held, not yet written: settlements are 10 s apart here.
      expect((await ledger(account.accountId)).held).toBeGreaterThan(0n);
      await app.usage.flush();
      await app.close();
      // Closing settled the holds: every forwarded call has its ledger row, nothing is left held.
      expect(await ledger(account.accountId)).toEqual({ sum: 960_000n, charges: 40, balance: 960_000n, held: 0n, open: 0 });
      const ids = answers.map((a) => a.chargeId as string);
      const [rows] = await sql<{ ledger: number }[]>`
        select count(*)::int as ledger from ledger_entries where id = any(${ids}::uuid[]) and kind = 'charge' and hold_id is not null`;
      expect(rows!.ledger).toBe(40);
      // Each call's usage event names its charge and its hold, once.
      await expect
        .poll(
          async () =>
            (
              await sql<
                { n: number }[]
              >`select count(distinct charge_id)::int as n from usage_events where charge_id = any(${ids}::uuid[]) and hold_id is not null`
            )[0]!.n,
          {
            timeout: 20_000,
            interval: 100,
          },
        )
        .toBe(40);
      const [usage] = await sql<{ events: number; cost: bigint }[]>`
        select count(*)::int as events, sum(cost_micros)::bigint as cost from usage_events where account_id = ${account.accountId}`;
      expect(usage).toEqual({ events: 40, cost: 40_000n });
    } finally {
      await worker.close();
      await workerRedis.quit();
      await app.close().catch(() => {});
      await upstream.close();
    }
  });
});

describe('X-Service-Balance while a credit hold is open (exact on a single edge)', () => {
  it('follows refunds and bursts to the micro-dollar: every answer says what the ledger says once settled', async () => {
    const upstream = await startUpstream((req, res) => {
      const fail = (req.url ?? '').includes('/fail');
      res.writeHead(fail ? 500 : 200, { 'content-type': 'application/json' });
      res.end(fail ? '{"error":"boom"}' : '{"ok":true}');
    });
    const app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('holdbal'),
      CREDIT_HOLD_MIN_CALLS_PER_SECOND: '1',
      CREDIT_HOLD_SETTLE_MS: '10000',
    });
    try {
      const apiId = await registerApi({ baseUrl: upstream.url, price: '0.001' });
      const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
      const callOnce = async (path: string) => {
        const res = await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}${path}`, headers: { 'x-api-key': account.fullKey } });
        return { status: res.statusCode, balance: res.headers['x-service-balance'] as string };
      };
      /** The balance the ledger holds once every held call is written. */
      const settled = async () => {
        await app.charges.flush();
        const [row] = await sql<{ balance: bigint }[]>`select balance_micros as balance from accounts where id = ${account.accountId}`;
        return (Number(row!.balance) / 1e6).toString();
      };
      // Busy enough for a hold.
      for (let i = 0; i < 5; i += 1) expect((await callOnce(`/warm/${i}`)).status).toBe(200);
      expect((await ledger(account.accountId)).open).toBe(1);
      // A refunded call, then a served one: each reports the balance the ledger ends with.
      const refunded = await callOnce('/fail');
      expect(refunded.status).toBe(502);
      expect(refunded.balance).toBe(await settled());
      const next = await callOnce('/after-refund');
      expect(next.status).toBe(200);
      expect(next.balance).toBe(await settled());
      // A burst of 24 at once, a quarter of them refunded; then one more call.
      const burst = await Promise.all(Array.from({ length: 24 }, (_, i) => callOnce(i % 4 === 0 ? `/fail/${i}` : `/burst/${i}`)));
      expect(burst.filter((b) => b.status === 502)).toHaveLength(6);
      // The burst's refunds raced its settlements and grants; none may be lost or counted twice.
      const last = await callOnce('/after-burst');
      expect(last.balance).toBe(await settled());
      expect(last.balance).toBe(String((1_000_000 - (5 + 1 + 18 + 1) * 1_000) / 1e6));
    } finally {
      await app.close();
      await upstream.close();
    }
  });
});
