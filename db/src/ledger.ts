import type { Db, Sql } from './sql.js';

export interface ChargeRequest {
  accountId: string;
  costMicros: bigint;
  /** The key that made the call, recorded on the ledger row. */
  keyId?: string | null;
  /** True when the key is an agent key with a spend limit: the limit is advanced in the same transaction. */
  spendLimited?: boolean;
  apiId?: string | null;
  item: string;
  description?: string | null;
}

export type ChargeResult =
  | { ok: true; chargeId: string; balanceMicros: bigint; costMicros: bigint }
  | { ok: false; reason: 'insufficient_balance'; balanceMicros: bigint; costMicros: bigint }
  | { ok: false; reason: 'spend_limit_exceeded'; balanceMicros: bigint; costMicros: bigint; spendLimitMicros: bigint; spentMicros: bigint };

type ChargeFailure = Extract<ChargeResult, { ok: false }>;

class ChargeRefused extends Error {
  constructor(readonly result: ChargeFailure) {
    super(result.reason);
  }
}

/**
 * Debits an account and appends the ledger row. The common case is one statement: the balance
 * decreases only when it stays non-negative and the row is written only when it does, so concurrent
 * charges can neither overdraw the account nor be lost. For an agent key with a spend limit, the
 * limit is advanced first in the same transaction and rolled back with it when the debit fails.
 */
export async function charge(sql: Sql, req: ChargeRequest): Promise<ChargeResult> {
  if (req.costMicros < 0n) throw new RangeError('a charge cannot be negative');
  if (!req.spendLimited || !req.keyId) return debitStatement(sql, req);
  const keyId = req.keyId;
  try {
    return await sql.begin(async (tx) => {
      const [key] = await tx<{ id: string }[]>`
        update api_keys set spent_micros = spent_micros + ${req.costMicros}
         where id = ${keyId} and (spend_limit_micros is null or spent_micros + ${req.costMicros} <= spend_limit_micros)
        returning id`;
      if (!key) {
        const [state] = await tx<{ spend_limit_micros: bigint; spent_micros: bigint; balance_micros: bigint }[]>`
          select k.spend_limit_micros, k.spent_micros, a.balance_micros
            from api_keys k join accounts a on a.id = k.account_id where k.id = ${keyId}`;
        if (!state) throw new Error(`key ${keyId} does not exist`);
        throw new ChargeRefused({
          ok: false,
          reason: 'spend_limit_exceeded',
          balanceMicros: state.balance_micros,
          costMicros: req.costMicros,
          spendLimitMicros: state.spend_limit_micros,
          spentMicros: state.spent_micros,
        });
      }
      const result = await debitStatement(tx, req);
      if (!result.ok) throw new ChargeRefused(result);
      return result;
    });
  } catch (error) {
    if (error instanceof ChargeRefused) return error.result;
    throw error;
  }
}

async function debitStatement(db: Db, req: ChargeRequest): Promise<ChargeResult> {
  // Money the edges hold (credit reservation, db/src/credit-holds.ts) is not spendable here.
  const rows = await db<{ id: string; available_micros: bigint }[]>`
    with debit as (
      update accounts
         set balance_micros = balance_micros - ${req.costMicros}
       where id = ${req.accountId} and balance_micros - held_micros >= ${req.costMicros}
      returning balance_micros, held_micros
    ),
    entry as (
      insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description)
      select ${req.accountId}, 'charge', ${-req.costMicros}, debit.balance_micros, ${req.keyId ?? null}, ${req.apiId ?? null}, ${req.item}, ${req.description ?? null}
        from debit
      returning id
    )
    select entry.id, debit.balance_micros - debit.held_micros as available_micros from entry, debit`;
  const row = rows[0];
  if (row) return { ok: true, chargeId: row.id, balanceMicros: row.available_micros, costMicros: req.costMicros };
  const balance = await getSpendable(db, req.accountId);
  if (balance === null) throw new Error(`account ${req.accountId} does not exist`);
  return { ok: false, reason: 'insufficient_balance', balanceMicros: balance, costMicros: req.costMicros };
}

/** What the account can still spend: its balance less what edges hold for calls in flight. */
export async function getSpendable(db: Db, accountId: string): Promise<bigint | null> {
  const [row] = await db<{ available: bigint }[]>`select balance_micros - held_micros as available from accounts where id = ${accountId}`;
  return row ? row.available : null;
}

/** Throws for a charge `chargeBatch()` does not take: a negative cost, or a spend-limited agent key. */
export function assertBatchable(req: ChargeRequest): void {
  if (req.costMicros < 0n) throw new RangeError('a charge cannot be negative');
  if (req.spendLimited && req.keyId) throw new RangeError('a spend-limited charge goes through charge()');
}

/**
 * Debits several accounts in one statement (and so one commit): the same rule as `charge()` for each
 * request on its own, the balance decreasing only when it stays non-negative and the ledger row
 * written only when it does. The accounts must be distinct and none of the requests spend-limited
 * (those go through `charge()`). The rows are locked in id order before they change, so batches
 * running at once on overlapping accounts wait for each other instead of deadlocking. The results
 * come back in the order of the requests, `null` for an account that does not exist; a statement
 * that fails charges nothing at all.
 */
export async function chargeBatch(db: Db, reqs: ChargeRequest[]): Promise<Array<ChargeResult | null>> {
  if (reqs.length === 0) return [];
  const accounts = new Set<string>();
  for (const req of reqs) {
    assertBatchable(req);
    // Ids are compared as Postgres compares uuids: case does not make another account.
    const account = req.accountId.toLowerCase();
    if (accounts.has(account)) throw new RangeError('a charge batch holds each account at most once');
    accounts.add(account);
  }
  const rows = await db<{ ord: bigint; id: string | null; balance_micros: bigint | null }[]>`
    with req as (
      select * from unnest(
        ${reqs.map((r) => r.accountId)}::uuid[], ${reqs.map((r) => r.costMicros.toString())}::bigint[],
        ${reqs.map((r) => r.keyId ?? null)}::text[], ${reqs.map((r) => r.apiId ?? null)}::text[],
        ${reqs.map((r) => r.item)}::text[], ${reqs.map((r) => r.description ?? null)}::text[]
      ) with ordinality as r(account_id, cost, key_id, api_id, item, description, ord)
    ),
    locked as (
      select a.id, a.balance_micros, a.held_micros from accounts a where a.id in (select account_id from req) order by a.id for no key update
    ),
    -- The balance is taken from the locked row (its newest version, held until commit), not from the
    -- statement's snapshot: a top-up that committed while the batch waited for the lock counts.
    debit as (
      update accounts a
         set balance_micros = l.balance_micros - r.cost
        from req r join locked l on l.id = r.account_id
       where a.id = r.account_id and l.balance_micros - l.held_micros >= r.cost
      returning a.id, a.balance_micros, a.held_micros
    ),
    entry as (
      insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description)
      select r.account_id, 'charge', -r.cost, d.balance_micros, r.key_id, r.api_id, r.item, r.description
        from req r join debit d on d.id = r.account_id
      order by r.ord
      returning id, account_id, balance_after_micros
    )
    -- The balance each caller is told: what it can still spend (held money left out).
    select r.ord, e.id, coalesce(e.balance_after_micros, l.balance_micros) - l.held_micros as balance_micros
      from req r
      left join entry e on e.account_id = r.account_id
      left join locked l on l.id = r.account_id
     order by r.ord`;
  return reqs.map((req, i) => {
    const row = rows[i];
    if (!row || Number(row.ord) !== i + 1) throw new Error('charge batch answered out of order');
    if (row.id !== null && row.balance_micros !== null)
      return { ok: true, chargeId: row.id, balanceMicros: row.balance_micros, costMicros: req.costMicros };
    if (row.balance_micros === null) return null;
    return { ok: false, reason: 'insufficient_balance', balanceMicros: row.balance_micros, costMicros: req.costMicros };
  });
}

const UNIQUE_VIOLATION = '23505';
const isUniqueViolation = (error: unknown) => (error as { code?: string } | null)?.code === UNIQUE_VIOLATION;

/**
 * Refunds a charge with a ledger entry of its own that references it (`refund_of`). A charge has at
 * most one refund: the unique constraint makes a racing second refund fail as a whole statement, and
 * it then returns the first one. A limited agent key gets the refunded amount back on its spend.
 */
export async function refund(
  db: Db,
  chargeId: string,
  description = 'refund',
): Promise<{ refundId: string; balanceMicros: bigint; accountId: string; amountMicros: bigint; created: boolean }> {
  try {
    const rows = await db<{ id: string; balance_after_micros: bigint; account_id: string; amount_micros: bigint }[]>`
      with original as (
        select account_id, key_id, api_id, item, -amount_micros as amount
          from ledger_entries
         where id = ${chargeId} and kind = 'charge'
           and not exists (select 1 from ledger_entries where refund_of = ${chargeId})
      ),
      unspend as (
        update api_keys k set spent_micros = greatest(0, k.spent_micros - o.amount)
          from original o
         where k.id = o.key_id and k.spend_limit_micros is not null
        returning k.id
      ),
      credited as (
        update accounts a set balance_micros = a.balance_micros + o.amount
          from original o
         where a.id = o.account_id
        returning a.balance_micros, o.account_id, o.key_id, o.api_id, o.item, o.amount
      )
      insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description, refund_of)
      select account_id, 'refund', amount, balance_micros, key_id, api_id, item, ${description}, ${chargeId} from credited
      returning id, balance_after_micros, account_id, amount_micros`;
    const row = rows[0];
    if (row)
      return { refundId: row.id, balanceMicros: row.balance_after_micros, accountId: row.account_id, amountMicros: row.amount_micros, created: true };
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
  }
  const [existing] = await db<{ id: string; balance_micros: bigint; account_id: string; amount_micros: bigint }[]>`
    select r.id, a.balance_micros, r.account_id, r.amount_micros from ledger_entries r join accounts a on a.id = r.account_id where r.refund_of = ${chargeId}`;
  if (!existing) throw new Error(`charge ${chargeId} does not exist`);
  return {
    refundId: existing.id,
    balanceMicros: existing.balance_micros,
    accountId: existing.account_id,
    amountMicros: existing.amount_micros,
    created: false,
  };
}

/**
 * Credits an account (sign-up credit, top-up, adjustment) in one statement. With an idempotency key,
 * a repeated call returns the first entry instead of crediting twice; two racing calls with the same
 * key cannot both credit, because the losing statement fails on the unique index as a whole.
 */
export async function credit(
  db: Db,
  req: {
    accountId: string;
    amountMicros: bigint;
    kind: 'signup_credit' | 'topup' | 'adjustment';
    description?: string;
    idempotencyKey?: string | null;
  },
): Promise<{ entryId: string; balanceMicros: bigint; amountMicros: bigint; created: boolean }> {
  if (req.amountMicros < 0n) throw new RangeError('a credit cannot be negative');
  const idem = req.idempotencyKey ?? null;
  if (idem === null || !(await findIdempotent(db, req.accountId, idem))) {
    try {
      const rows = await db<{ id: string; balance_after_micros: bigint }[]>`
        with credited as (
          update accounts set balance_micros = balance_micros + ${req.amountMicros}, updated_at = now(),
                 clawback_debt = clawback_debt and balance_micros + ${req.amountMicros} < 0
           where id = ${req.accountId}
          returning balance_micros
        )
        insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, description, idempotency_key)
        select ${req.accountId}, ${req.kind}, ${req.amountMicros}, balance_micros, ${req.description ?? null}, ${idem} from credited
        returning id, balance_after_micros`;
      const row = rows[0];
      if (!row) throw new Error(`account ${req.accountId} does not exist`);
      return { entryId: row.id, balanceMicros: row.balance_after_micros, amountMicros: req.amountMicros, created: true };
    } catch (error) {
      if (!isUniqueViolation(error) || idem === null) throw error;
    }
  }
  const existing = await findIdempotent(db, req.accountId, idem as string);
  if (!existing) throw new Error('idempotent credit vanished');
  return { ...existing, created: false };
}

/**
 * Takes money back that a payment refunded or disputed at the payment provider had credited: the
 * one entry that may take a balance below zero (the account then gets 402 until it is positive).
 * Idempotent by key like `credit`. Call it inside the transaction that decided the amount.
 */
export async function clawback(
  db: Db,
  req: { accountId: string; amountMicros: bigint; description: string; idempotencyKey: string },
): Promise<{ entryId: string; balanceMicros: bigint }> {
  if (req.amountMicros <= 0n) throw new RangeError('a clawback must be positive');
  const existing = await findIdempotent(db, req.accountId, req.idempotencyKey);
  if (existing) return existing;
  const rows = await db<{ id: string; balance_after_micros: bigint }[]>`
    with debited as (
      update accounts set balance_micros = balance_micros - ${req.amountMicros}, updated_at = now(),
             clawback_debt = balance_micros - ${req.amountMicros} < 0
       where id = ${req.accountId}
      returning balance_micros
    )
    insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, description, idempotency_key)
    select ${req.accountId}, 'clawback', ${-req.amountMicros}, balance_micros, ${req.description}, ${req.idempotencyKey} from debited
    returning id, balance_after_micros`;
  const row = rows[0];
  if (!row) throw new Error(`account ${req.accountId} does not exist`);
  return { entryId: row.id, balanceMicros: row.balance_after_micros };
}

async function findIdempotent(db: Db, accountId: string, idempotencyKey: string) {
  const [row] = await db<{ id: string; amount_micros: bigint; balance_micros: bigint }[]>`
    select l.id, l.amount_micros, a.balance_micros from ledger_entries l join accounts a on a.id = l.account_id
     where l.account_id = ${accountId} and l.idempotency_key = ${idempotencyKey}`;
  return row ? { entryId: row.id, amountMicros: row.amount_micros, balanceMicros: row.balance_micros } : null;
}

export async function getBalance(db: Db, accountId: string): Promise<bigint | null> {
  const [row] = await db<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${accountId}`;
  return row ? row.balance_micros : null;
}

/**
 * Charges at least `olderThanSeconds` old (and made after reconciliation started) that have no
 * refund and whose outcome says a refund is owed: a usage event that recorded the call at no cost
 * (the edge decided to refund, the refund did not land) or no usage event at all (the edge never
 * recorded an outcome: it died, or the charge's commit outcome was unknown to it).
 */
export async function chargesOwedARefund(
  db: Db,
  olderThanSeconds: number,
  limit = 500,
): Promise<{ id: string; reason: 'refund_not_written' | 'no_outcome' }[]> {
  return db<{ id: string; reason: 'refund_not_written' | 'no_outcome' }[]>`
    select c.id, case when u.charge_id is null then 'no_outcome' else 'refund_not_written' end as reason
      from ledger_entries c
      left join lateral (select charge_id, cost_micros from usage_events where charge_id = c.id limit 1) u on true
     where c.kind = 'charge'
       and c.created_at >= (select charges_since from refund_reconciliation)
       and c.created_at < now() - make_interval(secs => ${olderThanSeconds})
       and not exists (select 1 from ledger_entries r where r.refund_of = c.id)
       -- A charge paid with x402 was paid from outside; it is never returned into the balance.
       and not exists (select 1 from x402_payments p where p.charge_id = c.id)
       and (u.charge_id is null or u.cost_micros = 0)
     order by c.created_at
     limit ${limit}`;
}
