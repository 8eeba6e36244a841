import { createAccount, findOwnedAccount, type AccountRow } from '#db/accounts';
import { createKey, type KeyRow } from '#db/keys';
import { credit } from '#db/ledger';
import { createPerson, findPersonByEmail } from '#db/people';
import type { Sql } from '#db/sql';
import { hashPassword, verifyPassword } from './passwords.js';

export type Registration = { account: AccountRow; key: KeyRow; fullKey: string; balanceMicros: bigint };

/**
 * Creates an account owned by the person who signs in with this address, with its first API key and
 * its sign-up credit in one transaction, so a half-made account never exists. A pending invitation to
 * the address does not stand in the way. An address that already signs in (an approver of other
 * accounts) gets an account of its own only with that login's password, which is then unchanged.
 * Returns null when the address already owns an account (case-insensitively) or the password is not
 * that login's. The caller checks the password policy first.
 */
export async function registerAccount(
  sql: Sql,
  input: { email: string; password: string; signupCreditMicros: bigint; keyName?: string },
): Promise<Registration | null> {
  const existing = await findPersonByEmail(sql, input.email);
  // Either branch costs one scrypt derivation, so timing does not say whether the address signs in.
  if (existing && !(await verifyPassword(input.password, existing.password_hash))) return null;
  const passwordHash = existing ? null : await hashPassword(input.password);
  return sql.begin(async (tx) => {
    if (existing && (await findOwnedAccount(tx, existing.id))) return null;
    // A concurrent registration of the same new address waits on the unique index here, then loses.
    const person = existing ?? (passwordHash ? await createPerson(tx, { email: input.email, passwordHash }) : null);
    if (!person) return null;
    const account = await createAccount(tx, { email: input.email, ownerPersonId: person.id });
    if (!account) return null;
    const { key, fullKey } = await createKey(tx, { accountId: account.id, kind: 'api', name: input.keyName ?? 'default' });
    let balanceMicros = account.balance_micros;
    if (input.signupCreditMicros > 0n) {
      ({ balanceMicros } = await credit(tx, {
        accountId: account.id,
        amountMicros: input.signupCreditMicros,
        kind: 'signup_credit',
        description: 'sign-up credit',
      }));
    }
    return { account, key, fullKey, balanceMicros };
  }) as Promise<Registration | null>;
}
