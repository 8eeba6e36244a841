import { createAccount, type AccountRow } from '#db/accounts';
import { createKey, type KeyRow } from '#db/keys';
import { credit } from '#db/ledger';
import type { Sql } from '#db/sql';

export type Registration = { account: AccountRow; key: KeyRow; fullKey: string; balanceMicros: bigint };

/**
 * Creates an account with its first API key and its sign-up credit in one transaction, so a
 * half-made account never exists. Returns null when the email is taken (case-insensitively).
 */
export async function registerAccount(
  sql: Sql,
  input: { email: string; passwordHash: string; signupCreditMicros: bigint; keyName?: string },
): Promise<Registration | null> {
  return sql.begin(async (tx) => {
    const account = await createAccount(tx, { email: input.email, passwordHash: input.passwordHash });
    if (!account) return null;
    const { key, fullKey } = await createKey(tx, { accountId: account.id, kind: 'api', name: input.keyName ?? 'default' });
    let balanceMicros = account.balance_micros;
    if (input.signupCreditMicros > 0n) {
      ({ balanceMicros } = await credit(tx, { accountId: account.id, amountMicros: input.signupCreditMicros, kind: 'signup_credit', description: 'sign-up credit' }));
    }
    return { account, key, fullKey, balanceMicros };
  }) as Promise<Registration | null>;
}
