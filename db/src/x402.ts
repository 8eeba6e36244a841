import type { Db, Sql } from './sql.js';

/** Claims a payment payload for one call; false when the same payload was presented before. */
export async function claimX402Payment(db: Db, payment: { hash: Buffer; accountId: string; amountMicros: bigint }): Promise<boolean> {
  const rows = await db`
    insert into x402_payments (payload_hash, account_id, amount_micros) values (${payment.hash}, ${payment.accountId}, ${payment.amountMicros})
    on conflict (payload_hash) do nothing returning payload_hash`;
  return rows.length > 0;
}

export async function markX402Payment(
  db: Db,
  hash: Buffer,
  change: { status: 'verified' | 'invalid' | 'not_settled' | 'settle_failed'; reason?: string | null; payer?: string | null },
): Promise<void> {
  await db`
    update x402_payments set status = ${change.status}, reason = ${change.reason ?? null}, payer = coalesce(${change.payer ?? null}, payer), updated_at = now()
     where payload_hash = ${hash}`;
}

/** Why a verified payment's payer may not be served now; see admitX402Payer. */
export type PayerRefusal = 'recent_settle_failure' | 'unsettled_limit';

/**
 * Marks a claimed payment `verified` for `payer` (lowercased) unless serving it would leave the payer
 * too much unpaid work: the payer had a settlement refused by the facilitator within
 * `cooldownSeconds` (an answer of "no" such as insufficient funds, not a facilitator that did not
 * answer), or the payments of theirs verified and not yet settled, this one included, would exceed
 * `maxUnsettledMicros` (one payment alone is always let through, whatever its price). Payments
 * verified longer ago than `inFlightSeconds` (their authorization has expired) no longer count.
 * Serialised per payer, so concurrent payments cannot all see the same room. Null when admitted;
 * else the payment is marked `not_settled` with the reason.
 */
export async function admitX402Payer(
  sql: Sql,
  input: { hash: Buffer; payer: string; amountMicros: bigint; maxUnsettledMicros: bigint; cooldownSeconds: number; inFlightSeconds: number },
): Promise<PayerRefusal | null> {
  const payer = input.payer.toLowerCase();
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`x402-payer:${payer}`}, 0))`;
    const [failed] = await tx`
      select 1 from x402_payments
       where payer = ${payer} and status = 'settle_failed' and reason is distinct from 'facilitator_unreachable'
         and updated_at > now() - make_interval(secs => ${input.cooldownSeconds})
       limit 1`;
    let refusal: PayerRefusal | null = failed ? 'recent_settle_failure' : null;
    if (!refusal) {
      const [row] = await tx<{ unsettled: bigint }[]>`
        select coalesce(sum(amount_micros), 0)::bigint as unsettled from x402_payments
         where payer = ${payer} and status = 'verified' and created_at > now() - make_interval(secs => ${input.inFlightSeconds})`;
      const unsettled = row?.unsettled ?? 0n;
      if (unsettled > 0n && unsettled + input.amountMicros > input.maxUnsettledMicros) refusal = 'unsettled_limit';
    }
    await tx`
      update x402_payments set status = ${refusal ? 'not_settled' : 'verified'}, reason = ${refusal}, payer = ${payer}, updated_at = now()
       where payload_hash = ${input.hash}`;
    return refusal;
  }) as Promise<PayerRefusal | null>;
}

/** What a settled payment's ledger pair records about the call it paid for. */
export interface X402Call {
  keyId: string | null;
  apiId: string | null;
  item: string;
  description: string | null;
}

/** The facilitator's settlement of a payment. */
export interface X402Settlement {
  transaction: string;
  network: string;
  payer: string | null;
}

/**
 * A payment settled at the facilitator whose ledger entries could not be written: kept with its
 * settlement and call, for an operator to record (recordUnrecordedX402Payment).
 */
export async function markX402Unrecorded(db: Db, hash: Buffer, settlement: X402Settlement, call: X402Call, reason: string): Promise<void> {
  await db`
    update x402_payments
       set status = 'settled_unrecorded', reason = ${reason}, transaction = ${settlement.transaction}, network = ${settlement.network},
           payer = coalesce(${settlement.payer}, payer), call = ${db.json({ ...call })}, updated_at = now()
     where payload_hash = ${hash}`;
}

/**
 * A settled payment, in one transaction: an `x402_credit` of the price and the call's `charge` of
 * the same amount (the balance is where it was), and the payment marked settled with its
 * transaction. Returns the charge's id (X-Service-Charge-Id).
 */
export async function recordX402Settlement(
  sql: Sql,
  settled: { hash: Buffer; accountId: string; costMicros: bigint } & X402Call & X402Settlement,
): Promise<string> {
  return sql.begin((tx) => writeX402Settlement(tx, settled)) as Promise<string>;
}

async function writeX402Settlement(
  tx: Db,
  settled: { hash: Buffer; accountId: string; costMicros: bigint } & X402Call & X402Settlement,
): Promise<string> {
  const [account] = await tx<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${settled.accountId} for no key update`;
  if (!account) throw new Error(`account ${settled.accountId} does not exist`);
  const balance = account.balance_micros;
  await tx`
    insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description)
    values (${settled.accountId}, 'x402_credit', ${settled.costMicros}, ${balance + settled.costMicros}, ${settled.keyId}, ${settled.apiId}, ${settled.item},
            ${`x402 payment ${settled.transaction} on ${settled.network}`})`;
  const [charge] = await tx<{ id: string }[]>`
    insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description)
    values (${settled.accountId}, 'charge', ${-settled.costMicros}, ${balance}, ${settled.keyId}, ${settled.apiId}, ${settled.item}, ${settled.description})
    returning id`;
  await tx`
    update x402_payments set status = 'settled', transaction = ${settled.transaction}, network = ${settled.network},
           payer = coalesce(${settled.payer}, payer), charge_id = ${charge!.id}, updated_at = now()
     where payload_hash = ${settled.hash}`;
  return charge!.id;
}

/** A payment kept as settled_unrecorded, as the operator command lists it. */
export interface UnrecordedX402Payment {
  /** The payment payload's hash, hex: what `x402-record --hash` takes. */
  hash: string;
  accountId: string;
  amountMicros: bigint;
  transaction: string | null;
  network: string | null;
  payer: string | null;
  call: X402Call | null;
  reason: string | null;
  updatedAt: Date;
}

export async function listUnrecordedX402Payments(db: Db): Promise<UnrecordedX402Payment[]> {
  const rows = await db<
    {
      payload_hash: Buffer;
      account_id: string;
      amount_micros: bigint;
      transaction: string | null;
      network: string | null;
      payer: string | null;
      call: X402Call | null;
      reason: string | null;
      updated_at: Date;
    }[]
  >`
    select payload_hash, account_id, amount_micros, transaction, network, payer, call, reason, updated_at
      from x402_payments where status = 'settled_unrecorded' order by updated_at`;
  return rows.map((r) => ({
    hash: r.payload_hash.toString('hex'),
    accountId: r.account_id,
    amountMicros: r.amount_micros,
    transaction: r.transaction,
    network: r.network,
    payer: r.payer,
    call: r.call,
    reason: r.reason,
    updatedAt: r.updated_at,
  }));
}

/**
 * Writes the ledger pair of a settled_unrecorded payment, as the edge would have (an x402_credit and
 * the call's charge; the balance ends where it was), and marks it settled. Idempotent: null when the
 * payment is not (or no longer) settled_unrecorded, or lacks its settlement (kept before 00022).
 */
export async function recordUnrecordedX402Payment(sql: Sql, hash: Buffer): Promise<{ chargeId: string } | null> {
  return sql.begin(async (tx) => {
    const [row] = await tx<
      { account_id: string; amount_micros: bigint; transaction: string | null; network: string | null; payer: string | null; call: X402Call | null }[]
    >`
      select account_id, amount_micros, transaction, network, payer, call from x402_payments
       where payload_hash = ${hash} and status = 'settled_unrecorded' for update`;
    if (!row || row.transaction === null || row.network === null) return null;
    const call: X402Call = row.call ?? { keyId: null, apiId: null, item: 'x402', description: null };
    // The key may have been deleted since (its ledger rows keep no key then, as on deletion).
    if (call.keyId !== null && (await tx`select 1 from api_keys where id = ${call.keyId}`).length === 0) call.keyId = null;
    const chargeId = await writeX402Settlement(tx, {
      hash,
      accountId: row.account_id,
      costMicros: row.amount_micros,
      ...call,
      transaction: row.transaction,
      network: row.network,
      payer: row.payer,
    });
    await tx`update x402_payments set reason = 'recorded by an operator' where payload_hash = ${hash}`;
    return { chargeId };
  }) as Promise<{ chargeId: string } | null>;
}
