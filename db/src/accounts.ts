import type { Db } from './sql.js';

export interface AccountRow {
  id: string;
  email: string;
  balance_micros: bigint;
  created_at: Date;
}

/**
 * Creates an account owned by a person (who signs in to it; null for an account only its keys use);
 * returns null when the email (compared case-insensitively) already names an account. An invitation
 * to the address reserves nothing here.
 */
export async function createAccount(db: Db, input: { email: string; ownerPersonId: string | null }): Promise<AccountRow | null> {
  const rows = await db<AccountRow[]>`
    insert into accounts (email, owner_person_id) values (${input.email}, ${input.ownerPersonId})
    on conflict ((lower(email))) do nothing
    returning id, email, balance_micros, created_at`;
  return rows[0] ?? null;
}

export async function findAccountByEmail(db: Db, email: string): Promise<AccountRow | null> {
  const [row] = await db<AccountRow[]>`
    select id, email, balance_micros, created_at from accounts where lower(email) = lower(${email})`;
  return row ?? null;
}

/** The account a person owns, if any. */
export async function findOwnedAccount(db: Db, personId: string): Promise<AccountRow | null> {
  const [row] = await db<AccountRow[]>`select id, email, balance_micros, created_at from accounts where owner_person_id = ${personId}`;
  return row ?? null;
}

export async function getAccount(db: Db, id: string): Promise<AccountRow | null> {
  const [row] = await db<AccountRow[]>`select id, email, balance_micros, created_at from accounts where id = ${id}`;
  return row ?? null;
}
