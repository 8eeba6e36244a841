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

/**
 * A live edge's hold has its expiry pushed forward (to now + the TTL) only once less than this share
 * of the TTL is left, not by every settlement and grant: `expires_at` is indexed, so every change of
 * it writes a new row version and new entries in every index (no HOT update); at one per hold five
 * times a second the holds' dead versions piled up between vacuums (10,960 for 640 holds after one
 * bench run), and each held call's ledger row checks its hold (a foreign key) through the primary key
 * index that carries them (docs/decisions/credit-hold-expiry-refresh.md). Right after a settlement a
 * live edge's hold has at least this share of the TTL left (it had all of it), so an edge that stops
 * settling is taken for dead a quarter of the TTL sooner than before.
 */
const EXPIRY_REFRESH_AT = 0.75;

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
        update credit_holds set reserved_micros = reserved_micros + ${granted},
               expires_at = case when expires_at < now() + make_interval(secs => ${req.ttlSeconds * EXPIRY_REFRESH_AT})
                                 then now() + make_interval(secs => ${req.ttlSeconds}) else expires_at end
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
 * totals (the larger one wins), so a retry returns nothing twice. The calls of holds closed under
 * the edge are charged first (as ordinary charges), then every open hold's, each account's running
 * balance in that order; the results follow `items`, each open hold's with its account's balances
 * after the whole settlement. Every open hold of the edge whose expiry is a quarter spent gets it
 * pushed forward: the edge is alive.
 */
export async function settleHolds(sql: Sql, edgeId: string, items: HoldSettlement[], ttlSeconds: number): Promise<HoldSettled[]> {
  const settled = items.length === 0 ? [] : await settleInTransaction(sql, edgeId, items);
  // On its own, after the commit: a statement that locked holds before their accounts could deadlock
  // with a grant (which locks the account, then the hold).
  await sql`
    update credit_holds set expires_at = now() + make_interval(secs => ${ttlSeconds})
     where edge_id = ${edgeId} and closed_at is null and expires_at < now() + make_interval(secs => ${ttlSeconds * EXPIRY_REFRESH_AT})`;
  return settled;
}

async function settleInTransaction(sql: Sql, edgeId: string, items: HoldSettlement[]): Promise<HoldSettled[]> {
  if (new Set(items.map((i) => i.holdId)).size !== items.length) throw new Error('a settlement names each hold once');
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
    const results = new Array<HoldSettled>(items.length);
    // First the calls of holds closed under the edge (taken for dead after a long stall): those the
    // recovery did not charge are charged now as ordinary charges, as far as the balance allows.
    for (const [i, item] of items.entries()) {
      const account = balances.get(item.accountId);
      if (!account) {
        // The account is gone (its holds with it, by cascade): nothing to write, and one missing
        // account must not hold back the settlement of every other.
        results[i] = { holdId: item.holdId, open: false, availableMicros: 0n, balanceMicros: 0n, unpaid: item.charges };
      } else if (!open.has(item.holdId)) {
        const unpaid = await chargeOutsideHold(tx, item.accountId, account, item.charges);
        results[i] = { holdId: item.holdId, open: false, availableMicros: account.balance - account.held, balanceMicros: account.balance, unpaid };
      }
    }
    // Then every open hold's calls, in one statement each for the ledger rows, the holds and the
    // accounts, whatever the number of holds (one statement per hold was most of a settlement's cost).
    const settling = items.flatMap((item, i) => (results[i] === undefined ? [{ item, i, hold: open.get(item.holdId)! }] : []));
    if (settling.length === 0) return results;
    const charged = await insertHeldCharges(
      tx,
      settling.map(({ item }) => ({ accountId: item.accountId, holdId: item.holdId, charges: item.charges })),
      new Map([...balances].map(([id, a]) => [id, a.balance])),
    );
    const holdRows = settling.map(({ item, hold }, n) => {
      const account = balances.get(item.accountId)!;
      const chargedTotal = hold.charged_micros + charged[n]!;
      const released = item.close
        ? hold.reserved_micros - chargedTotal
        : maxOf(
            hold.released_micros,
            item.releasedMicros < hold.reserved_micros - chargedTotal ? item.releasedMicros : hold.reserved_micros - chargedTotal,
          );
      account.balance -= charged[n]!;
      account.held -= charged[n]! + (released - hold.released_micros);
      return { id: item.holdId, charged: chargedTotal, released, close: item.close };
    });
    await tx`
      update credit_holds h set charged_micros = v.charged, released_micros = v.released,
             closed_at = case when v.close then now() else null end
        from unnest(${holdRows.map((h) => h.id)}::uuid[], ${holdRows.map((h) => h.charged.toString())}::bigint[],
                    ${holdRows.map((h) => h.released.toString())}::bigint[], ${holdRows.map((h) => String(h.close))}::text[]::boolean[]) as v(id, charged, released, close)
       where h.id = v.id`;
    // A clawback that landed while a hold was open can leave less than it holds: the calls were paid
    // for when the hold was taken, so they still settle, and the account is in debt as after any
    // clawback.
    const settled = [...new Set(settling.map(({ item }) => item.accountId))].sort();
    await tx`
      update accounts a set balance_micros = v.balance, held_micros = v.held, clawback_debt = a.clawback_debt or v.balance < 0
        from unnest(${settled}::uuid[], ${settled.map((id) => balances.get(id)!.balance.toString())}::bigint[],
                    ${settled.map((id) => balances.get(id)!.held.toString())}::bigint[]) as v(id, balance, held)
       where a.id = v.id`;
    for (const { item, i } of settling) {
      const account = balances.get(item.accountId)!;
      results[i] = { holdId: item.holdId, open: true, availableMicros: account.balance - account.held, balanceMicros: account.balance, unpaid: [] };
    }
    return results;
  });
}

/**
 * Inserts the charges of one or more holds, each group's in order, and returns the sum written for
 * each group. Each row's balance after it runs on from `balances` (the accounts' ledger balances, read
 * under their lock), account by account. A row whose id is already in the ledger (a settlement retried
 * after an unknown commit, with the calls taken since) is skipped and moves nothing: the insert skips
 * conflicting ids, and only in that case are the written rows' balances corrected by a second
 * statement. (It used to look the ids up first, one statement per hold, and a plan chosen while the
 * ledger was small scanned the whole table for them.)
 */
async function insertHeldCharges(
  db: Db,
  groups: { accountId: string; holdId: string; charges: HeldCharge[] }[],
  balances: Map<string, bigint>,
): Promise<bigint[]> {
  // Ids in Postgres's own spelling (lower case), each once: the written rows are told by the ids the
  // insert returns, so an id spelled otherwise, or twice, would be written and not counted.
  const rows = groups.flatMap((g) => g.charges.map((c) => ({ ...c, id: c.id.toLowerCase(), accountId: g.accountId, holdId: g.holdId })));
  if (rows.length === 0) return groups.map(() => 0n);
  if (new Set(rows.map((r) => r.id)).size !== rows.length) throw new Error('a settlement names each charge once');
  /** Each row's balance after it, running on account by account over the rows `counted` keeps. */
  const runningBalances = (counted: (row: (typeof rows)[number]) => boolean) => {
    const running = new Map(balances);
    return rows.map((row) => {
      if (!counted(row)) return null;
      const after = running.get(row.accountId)! - row.costMicros;
      running.set(row.accountId, after);
      return after;
    });
  };
  const after = runningBalances(() => true);
  const inserted = await db<{ id: string }[]>`
    insert into ledger_entries (id, account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description, hold_id, created_at)
    select r.id, r.account_id, 'charge', -r.cost, r.after, r.key_id, r.api_id, r.item, r.description, r.hold_id, r.at
      from unnest(
        ${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.accountId)}::uuid[], ${rows.map((r) => r.holdId)}::uuid[],
        ${rows.map((r) => r.costMicros.toString())}::bigint[], ${after.map((a) => a!.toString())}::bigint[],
        ${rows.map((r) => r.keyId)}::text[], ${rows.map((r) => r.apiId)}::text[], ${rows.map((r) => r.item)}::text[],
        ${rows.map((r) => r.description)}::text[], ${rows.map((r) => r.at.toISOString())}::timestamptz[]
      ) with ordinality as r(id, account_id, hold_id, cost, after, key_id, api_id, item, description, at, ord)
     order by r.ord
    on conflict (id) do nothing
    returning id`;
  const written = new Set(inserted.map((r) => r.id));
  if (written.size < rows.length) {
    // Some were written before: the balances after the new rows leave the old ones out.
    const corrected = runningBalances((row) => written.has(row.id));
    const fix = rows.flatMap((row, n) => (written.has(row.id) && corrected[n] !== after[n] ? [{ id: row.id, after: corrected[n]! }] : []));
    if (fix.length > 0)
      await db`
        update ledger_entries l set balance_after_micros = v.after
          from unnest(${fix.map((f) => f.id)}::uuid[], ${fix.map((f) => f.after.toString())}::bigint[]) as v(id, after)
         where l.id = v.id`;
  }
  return groups.map((g) => g.charges.reduce((sum, c) => (written.has(c.id.toLowerCase()) ? sum + c.costMicros : sum), 0n));
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
        const charged = (
          await insertHeldCharges(
            tx,
            [{ accountId: candidate.account_id, holdId: candidate.id, charges: fitting }],
            new Map([[candidate.account_id, account.balance_micros]]),
          )
        )[0]!;
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
