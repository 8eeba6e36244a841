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
  change: { status: 'verified' | 'invalid' | 'not_settled' | 'settle_failed' | 'settled_unrecorded'; reason?: string | null; payer?: string | null },
): Promise<void> {
  await db`
    update x402_payments set status = ${change.status}, reason = ${change.reason ?? null}, payer = coalesce(${change.payer ?? null}, payer), updated_at = now()
     where payload_hash = ${hash}`;
}

/**
 * A settled payment, in one transaction: an `x402_credit` of the price and the call's `charge` of
 * the same amount (the balance is where it was), and the payment marked settled with its
 * transaction. Returns the charge's id (X-Service-Charge-Id).
 */
export async function recordX402Settlement(
  sql: Sql,
  settled: {
    hash: Buffer;
    accountId: string;
    costMicros: bigint;
    keyId: string | null;
    apiId: string | null;
    item: string;
    description: string | null;
    transaction: string;
    network: string;
    payer: string | null;
  },
): Promise<string> {
  return sql.begin(async (tx) => {
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
  }) as Promise<string>;
}
