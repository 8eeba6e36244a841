import { credit } from '#db/ledger';
import type { Sql } from '#db/sql';

export type TopUpResult =
  | { ok: true; balanceMicros: bigint; creditedMicros: bigint; entryId: string; replayed: boolean }
  | { ok: false; reason: 'cap_exceeded'; balanceMicros: bigint; capMicros: bigint }
  | { ok: false; reason: 'idempotency_conflict'; creditedMicros: bigint }
  | { ok: false; reason: 'no_account' };

/**
 * A sandbox top-up: credits the account unless the balance would pass the cap. The account row is
 * locked first, so concurrent top-ups cannot together pass the cap, and a request with an
 * idempotency key that was already used answers the first result (same amount) or a conflict
 * (different amount) without crediting again.
 */
export async function topUp(
  sql: Sql,
  input: { accountId: string; amountMicros: bigint; capMicros: bigint; idempotencyKey: string | null },
): Promise<TopUpResult> {
  const idem = input.idempotencyKey === null ? null : `topup:${input.idempotencyKey}`;
  return sql.begin(async (tx): Promise<TopUpResult> => {
    const [account] = await tx<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${input.accountId} for update`;
    if (!account) return { ok: false, reason: 'no_account' };
    if (idem !== null) {
      const [first] = await tx<{ id: string; amount_micros: bigint; balance_after_micros: bigint }[]>`
        select id, amount_micros, balance_after_micros from ledger_entries where account_id = ${input.accountId} and idempotency_key = ${idem}`;
      if (first && first.amount_micros !== input.amountMicros)
        return { ok: false, reason: 'idempotency_conflict', creditedMicros: first.amount_micros };
      if (first)
        return { ok: true, balanceMicros: first.balance_after_micros, creditedMicros: first.amount_micros, entryId: first.id, replayed: true };
    }
    if (account.balance_micros + input.amountMicros > input.capMicros) {
      return { ok: false, reason: 'cap_exceeded', balanceMicros: account.balance_micros, capMicros: input.capMicros };
    }
    const entry = await credit(tx, {
      accountId: input.accountId,
      amountMicros: input.amountMicros,
      kind: 'topup',
      description: 'sandbox top-up',
      idempotencyKey: idem,
    });
    return { ok: true, balanceMicros: entry.balanceMicros, creditedMicros: entry.amountMicros, entryId: entry.entryId, replayed: false };
  });
}
