import { closeAccount, erasePerson, listUnendedSessions } from '#db/account-closure';
import { findOwnedAccount } from '#db/accounts';
import type { SessionRow } from '#db/cookbook-sessions';
import { getPersonWithPassword } from '#db/people';
import type { Sql } from '#db/sql';
import { PlatformError } from '#core/platform';
import { verifyPassword } from './passwords.js';

/** What deleting an account did. */
export interface DeletedAccount {
  accountId: string;
  revokedKeyIds: string[];
  forfeitedMicros: bigint;
  dashboardSessionsEnded: number;
  /** Cookbook sessions that had not ended: the caller cancels them (in Temporal) once this has committed. */
  unendedSessions: SessionRow[];
}

/** The placeholder a deleted account's address becomes: unique, undeliverable (RFC 2606 `.invalid`). */
export const deletedAccountEmail = (accountId: string) => `deleted-${accountId}@deleted.invalid`;

/**
 * Deletes the account a signed-in person owns, and their login, in one transaction (see
 * docs/decisions/account-deletion.md). The password must be right (401 `invalid_credentials`). A
 * balance left to spend is written off only with `forfeitBalance` (409 `balance_remaining` otherwise,
 * naming the amount). Keys are revoked, every dashboard session ends, approvers are removed,
 * stored credentials and webhooks deleted, the address erased; the ledger stays, under the
 * account's id only. The person's approver memberships elsewhere end with the login.
 */
export async function deleteOwnedAccount(
  sql: Sql,
  input: { personId: string; accountId: string; password: string; forfeitBalance: boolean },
): Promise<DeletedAccount> {
  const person = await getPersonWithPassword(sql, input.personId);
  if (!person) throw new PlatformError('invalid_session', 'This login no longer exists');
  if (!(await verifyPassword(input.password, person.password_hash))) {
    throw new PlatformError('invalid_credentials', 'The password is wrong', {
      hint: 'Enter the password you sign in with; deleting the account needs it.',
    });
  }
  return sql.begin(async (tx) => {
    const owned = await findOwnedAccount(tx, input.personId);
    if (!owned || owned.id !== input.accountId) {
      throw new PlatformError('forbidden', 'Only the owner can delete this account', {
        hint: 'Switch to the account you own to delete it; an approver cannot delete the account they approve for.',
      });
    }
    const [money] = await tx<{ spendable: bigint }[]>`
      select balance_micros - held_micros as spendable from accounts where id = ${owned.id} for update`;
    const spendable = money?.spendable ?? 0n;
    if (spendable > 0n && !input.forfeitBalance) {
      const dollars = Number(spendable) / 1_000_000;
      throw new PlatformError('balance_remaining', `The account still holds $${dollars.toFixed(2)}, which deleting it gives up`, {
        hint: 'Spend it first, or confirm that you give it up (forfeitBalance: true). It is not paid back.',
        details: { balance: dollars },
      });
    }
    const closed = await closeAccount(tx, owned.id, deletedAccountEmail(owned.id));
    if (!closed) throw new PlatformError('not_found', 'This account was deleted already');
    await erasePerson(tx, input.personId);
    const unendedSessions = await listUnendedSessions(tx, owned.id);
    return { accountId: owned.id, ...closed, unendedSessions };
  });
}
