import type { Db, Sql } from './sql.js';

/**
 * Credit holds: the ledger side of credit reservation (core billing's CreditReservations). An edge
 * holds a slice of a busy account's balance (`reserveCredit`), charges calls from it in memory, and
 * writes their ledger rows in batches (`settleHolds`). A hold's totals only grow, so every statement
 * here can be retried after an unknown commit without charging or returning anything twice.
 *
 * `accounts.balance_micros` stays the sum of the account's ledger entries; `accounts.held_micros` is
 * the part of it that holds keep. What may still be spent is `balance_micros - held_micros`: every
 * charge and every grant checks it, so holds can never spend money twice.
 */

/** A call charged from a hold, waiting for its ledger row. `id` is the charge id the caller was given. */
export interface HeldCharge {
  id: string;
  costMicros: bigint;
  keyId: string | null;
  apiId: string | null;
  item: string;
  description: string | null;
  /** When the call was charged (the ledger row's created_at). */
  at: Date;
}

export type ReserveResult = { ok: true; holdId: string; grantedMicros: bigint; availableMicros: bigint } | { ok: false; availableMicros: bigint };

/**
 * Grants up to `wantMicros` (at least `needMicros`, else nothing) of the account's spendable balance
 * to the edge's hold, opening one when `holdId` is null or the hold was closed meanwhile (a recovery
 * that took the edge for dead). `availableMicros` is what is left to spend outside holds afterwards.
 */
export async function reserveCredit(
  sql: Sql,
  req: { accountId: string; edgeId: string; holdId: string | null; wantMicros: bigint; needMicros: bigint; ttlSeconds: number },
): Promise<ReserveResult> {
  if (req.needMicros <= 0n || req.wantMicros < req.needMicros) throw new RangeError('a reservation needs 0 < need <= want');
  return sql.begin(async (tx) => {
    const [account] = await tx<{ available: bigint }[]>`
      select balance_micros - held_micros as available from accounts where id = ${req.accountId} for no key update`;
    if (!account) throw new Error(`account ${req.accountId} does not exist`);
    if (account.available < req.needMicros) return { ok: false, availableMicros: account.available };
    const granted = account.available < req.wantMicros ? account.available : req.wantMicros;
    await tx`update accounts set held_micros = held_micros + ${granted} where id = ${req.accountId}`;
    let holdId: string | null = null;
    if (req.holdId !== null) {
      const [hold] = await tx<{ id: string }[]>`
        update credit_holds set reserved_micros = reserved_micros + ${granted}, expires_at = now() + make_interval(secs => ${req.ttlSeconds})
         where id = ${req.holdId} and edge_id = ${req.edgeId} and closed_at is null
        returning id`;
      holdId = hold?.id ?? null;
    }
    if (holdId === null) {
      const [hold] = await tx<{ id: string }[]>`
        insert into credit_holds (account_id, edge_id, reserved_micros, expires_at)
        values (${req.accountId}, ${req.edgeId}, ${granted}, now() + make_interval(secs => ${req.ttlSeconds}))
        returning id`;
      holdId = hold!.id;
    }
    return { ok: true, holdId, grantedMicros: granted, availableMicros: account.available - granted };
  });
}

/** One hold's part of a settlement. `releasedMicros` is the edge's running total of what it gave back. */
export interface HoldSettlement {
  holdId: string;
  accountId: string;
  charges: HeldCharge[];
  releasedMicros: bigint;
  /** Returns everything not charged and closes the hold (the edge is done with it). */
  close: boolean;
}

export interface HoldSettled {
  holdId: string;
  /** False when the hold was already closed (by the recovery of an edge taken for dead): nothing was written. */
  open: boolean;
  /** Spendable balance outside holds after the settlement. */
  availableMicros: bigint;
  /** The account's ledger balance after the settlement. */
  balanceMicros: bigint;
  /** Calls of a closed hold that the balance could no longer pay (logged by the edge as lost revenue). */
  unpaid: HeldCharge[];
}

/**
 * Writes the ledger rows of calls charged from holds and returns what the edge released, for several
 * holds in one transaction. The rows carry the ids the callers were given; a row already written
 * (a retry) is skipped, and only what was actually written moves the balance. Releases are running
 * totals (the larger one wins), so a retry returns nothing twice. Every open hold of the edge gets
 * its expiry pushed forward: the edge is alive.
 */
export async function settleHolds(sql: Sql, edgeId: string, items: HoldSettlement[], ttlSeconds: number): Promise<HoldSettled[]> {
  const settled = items.length === 0 ? [] : await settleInTransaction(sql, edgeId, items);
  // On its own, after the commit: a statement that locked holds before their accounts could deadlock
  // with a grant (which locks the account, then the hold).
  await sql`update credit_holds set expires_at = now() + make_interval(secs => ${ttlSeconds}) where edge_id = ${edgeId} and closed_at is null`;
  return settled;
}

async function settleInTransaction(sql: Sql, edgeId: string, items: HoldSettlement[]): Promise<HoldSettled[]> {
  return sql.begin(async (tx) => {
    const accountIds = [...new Set(items.map((i) => i.accountId))].sort();
    // Accounts first, in id order (as every charge statement locks them), then the holds.
    const accounts = await tx<{ id: string; balance_micros: bigint; held_micros: bigint }[]>`
      select id, balance_micros, held_micros from accounts where id = any(${accountIds}::uuid[]) order by id for no key update`;
    const holds = await tx<{ id: string; reserved_micros: bigint; charged_micros: bigint; released_micros: bigint }[]>`
      select id, reserved_micros, charged_micros, released_micros from credit_holds
       where id = any(${items.map((i) => i.holdId)}::uuid[]) and edge_id = ${edgeId} and closed_at is null
       order by id for no key update`;
    const balances = new Map(accounts.map((a) => [a.id, { balance: a.balance_micros, held: a.held_micros }]));
    const open = new Map(holds.map((h) => [h.id, h]));
    const results: HoldSettled[] = [];
    for (const item of items) {
      const account = balances.get(item.accountId);
      if (!account) {
        // The account is gone (its holds with it, by cascade): nothing to write, and one missing
        // account must not hold back the settlement of every other.
        results.push({ holdId: item.holdId, open: false, availableMicros: 0n, balanceMicros: 0n, unpaid: item.charges });
        continue;
      }
      const hold = open.get(item.holdId);
      if (!hold) {
        // The hold was closed under the edge (taken for dead after a long stall): its calls the
        // recovery did not charge are charged now as ordinary charges, as far as the balance allows.
        const unpaid = await chargeOutsideHold(tx, item.accountId, account, item.charges);
        results.push({ holdId: item.holdId, open: false, availableMicros: account.balance - account.held, balanceMicros: account.balance, unpaid });
        continue;
      }
      const charged = await insertHeldCharges(tx, item.accountId, item.holdId, account.balance, item.charges);
      const chargedTotal = hold.charged_micros + charged;
      const released = item.close
        ? hold.reserved_micros - chargedTotal
        : maxOf(
            hold.released_micros,
            item.releasedMicros < hold.reserved_micros - chargedTotal ? item.releasedMicros : hold.reserved_micros - chargedTotal,
          );
      const releasedNow = released - hold.released_micros;
      await tx`
        update credit_holds set charged_micros = ${chargedTotal}, released_micros = ${released},
               closed_at = case when ${item.close} then now() else null end
         where id = ${item.holdId}`;
      account.balance -= charged;
      account.held -= charged + releasedNow;
      // A clawback that landed while the hold was open can leave less than it holds: the calls were
      // paid for when the hold was taken, so they still settle, and the account is in debt as after
      // any clawback.
      await tx`
        update accounts set balance_micros = ${account.balance}, held_micros = ${account.held},
               clawback_debt = clawback_debt or ${account.balance} < 0
         where id = ${item.accountId}`;
      results.push({ holdId: item.holdId, open: true, availableMicros: account.balance - account.held, balanceMicros: account.balance, unpaid: [] });
    }
    return results;
  });
}

/** Inserts a hold's charges (skipping ids already written) and returns the sum of those written. */
async function insertHeldCharges(db: Db, accountId: string, holdId: string, balanceBefore: bigint, charges: HeldCharge[]): Promise<bigint> {
  if (charges.length === 0) return 0n;
  const written = await db<{ id: string; amount_micros: bigint }[]>`
    select id, amount_micros from ledger_entries where id = any(${charges.map((c) => c.id)}::uuid[])`;
  const skip = new Set(written.map((w) => w.id));
  const fresh = charges.filter((c) => !skip.has(c.id));
  if (fresh.length === 0) return 0n;
  let balance = balanceBefore;
  const after: string[] = [];
  for (const c of fresh) {
    balance -= c.costMicros;
    after.push(balance.toString());
  }
  await db`
    insert into ledger_entries (id, account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description, hold_id, created_at)
    select r.id, ${accountId}, 'charge', -r.cost, r.after, r.key_id, r.api_id, r.item, r.description, ${holdId}, r.at
      from unnest(
        ${fresh.map((c) => c.id)}::uuid[], ${fresh.map((c) => c.costMicros.toString())}::bigint[], ${after}::bigint[],
        ${fresh.map((c) => c.keyId)}::text[], ${fresh.map((c) => c.apiId)}::text[], ${fresh.map((c) => c.item)}::text[],
        ${fresh.map((c) => c.description)}::text[], ${fresh.map((c) => c.at.toISOString())}::timestamptz[]
      ) with ordinality as r(id, cost, after, key_id, api_id, item, description, at, ord)
     order by r.ord`;
  return fresh.reduce((sum, c) => sum + c.costMicros, 0n);
}

/** Charges of a closed hold, each as an ordinary charge (no hold) while the spendable balance covers it. */
async function chargeOutsideHold(
  db: Db,
  accountId: string,
  account: { balance: bigint; held: bigint },
  charges: HeldCharge[],
): Promise<HeldCharge[]> {
  if (charges.length === 0) return [];
  const written = await db<{ id: string }[]>`select id from ledger_entries where id = any(${charges.map((c) => c.id)}::uuid[])`;
  const skip = new Set(written.map((w) => w.id));
  const unpaid: HeldCharge[] = [];
  for (const c of charges) {
    if (skip.has(c.id)) continue;
    if (account.balance - account.held < c.costMicros) {
      unpaid.push(c);
      continue;
    }
    account.balance -= c.costMicros;
    await db`
      insert into ledger_entries (id, account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description, created_at)
      values (${c.id}, ${accountId}, 'charge', ${-c.costMicros}, ${account.balance}, ${c.keyId}, ${c.apiId}, ${c.item}, ${c.description}, ${c.at})`;
    await db`update accounts set balance_micros = ${account.balance} where id = ${accountId}`;
  }
  return unpaid;
}

function maxOf(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/**
 * The recovery of holds whose edge stopped settling them (it crashed, or lost Postgres for longer
 * than the hold's expiry and the grace): the calls its usage events show as paid are written to the
 * ledger under the hold (with the ids the callers were given; rows the edge managed to write are
 * skipped), and the rest goes back to the balance. Returns the holds closed, the charges written and
 * the holds that could not be settled (each also passed to `onFailure`; they stay open for the next run).
 */
export async function settleExpiredHolds(
  sql: Sql,
  graceSeconds: number,
  { limit = 100, onFailure = () => {} }: { limit?: number; onFailure?: (holdId: string, error: unknown) => void } = {},
): Promise<{ holds: number; charges: number; failed: string[] }> {
  const expired = await sql<{ id: string; account_id: string }[]>`
    select id, account_id from credit_holds
     where closed_at is null and expires_at < now() - make_interval(secs => ${graceSeconds})
     order by expires_at limit ${limit}`;
  let charges = 0;
  let holds = 0;
  // Each hold in its own transaction, and one that fails (reported, tried again next run) does not
  // keep the others, or the refund reconciler that runs after this, from settling.
  const failed: string[] = [];
  for (const candidate of expired) {
    const done = await sql
      .begin(async (tx) => {
        const [account] = await tx<{ balance_micros: bigint; held_micros: bigint }[]>`
          select balance_micros, held_micros from accounts where id = ${candidate.account_id} for no key update`;
        const [hold] = await tx<{ reserved_micros: bigint; charged_micros: bigint; released_micros: bigint }[]>`
          select reserved_micros, charged_micros, released_micros from credit_holds
           where id = ${candidate.id} and closed_at is null and expires_at < now() - make_interval(secs => ${graceSeconds})
           for no key update`;
        if (!account || !hold) return null;
        // The hold's paid calls whose row the edge did not write before it stopped.
        const paid = await tx<{ charge_id: string; cost_micros: bigint; key_id: string | null; api_id: string; item: string; at: Date }[]>`
          select u.charge_id, u.cost_micros, u.key_id, u.api_id, u.item, u.at from usage_events u
           where u.hold_id = ${candidate.id} and u.charge_id is not null and u.cost_micros > 0
             and not exists (select 1 from ledger_entries l where l.id = u.charge_id)
           order by u.at, u.id`;
        // Never more than the hold kept: a usage event cannot charge money the hold did not hold.
        const room = hold.reserved_micros - hold.charged_micros - hold.released_micros;
        const fitting: HeldCharge[] = [];
        let sum = 0n;
        for (const p of paid) {
          if (sum + p.cost_micros > room) break;
          sum += p.cost_micros;
          fitting.push({
            id: p.charge_id,
            costMicros: p.cost_micros,
            keyId: p.key_id,
            apiId: p.api_id,
            item: p.item,
            description: 'charged from an expired hold',
            at: p.at,
          });
        }
        const charged = await insertHeldCharges(tx, candidate.account_id, candidate.id, account.balance_micros, fitting);
        const chargedTotal = hold.charged_micros + charged;
        const releasedNow = hold.reserved_micros - chargedTotal - hold.released_micros;
        await tx`
          update credit_holds set charged_micros = ${chargedTotal}, released_micros = released_micros + ${releasedNow}, closed_at = now()
           where id = ${candidate.id}`;
        await tx`
          update accounts set balance_micros = balance_micros - ${charged}, held_micros = held_micros - ${charged + releasedNow},
                 clawback_debt = clawback_debt or balance_micros - ${charged} < 0
           where id = ${candidate.account_id}`;
        return fitting.length;
      })
      .catch((error: unknown) => {
        onFailure(candidate.id, error);
        failed.push(candidate.id);
        return null;
      });
    if (done !== null) {
      holds += 1;
      charges += done;
    }
  }
  return { holds, charges, failed };
}
