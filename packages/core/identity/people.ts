import { findPersonByEmail, listMemberships, type MembershipRow, type PersonRow } from '#db/people';
import type { Db } from '#db/sql';
import { verifyPassword } from './passwords.js';

/**
 * A person who proved their password, with the accounts they belong to (owned first). Null for a
 * wrong password, an unknown address, or a person who belongs to no account any more (every
 * membership removed): all three look the same to the caller, and cost the same scrypt work.
 */
export async function authenticatePerson(db: Db, email: string, password: string): Promise<{ person: PersonRow; memberships: MembershipRow[] } | null> {
  const person = await findPersonByEmail(db, email);
  const passwordOk = await verifyPassword(password, person?.password_hash ?? null);
  if (!person || !passwordOk) return null;
  const memberships = await listMemberships(db, person.id);
  if (memberships.length === 0) return null;
  return { person: { id: person.id, email: person.email, created_at: person.created_at }, memberships };
}

export { listMemberships };
export type { MembershipRow, PersonRow };
