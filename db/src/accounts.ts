import type { Db } from './sql.js';

export interface AccountRow {
  id: string;
  email: string;
  balance_micros: bigint;
  created_at: Date;
}

/** Creates an account; returns null when the email (compared case-insensitively) is taken. */
export async function createAccount(db: Db, input: { email: string; passwordHash: string | null }): Promise<AccountRow | null> {
  const rows = await db<AccountRow[]>`
    insert into accounts (email, password_hash) values (${input.email}, ${input.passwordHash})
    on conflict ((lower(email))) do nothing
    returning id, email, balance_micros, created_at`;
  return rows[0] ?? null;
}

export async function findAccountByEmail(db: Db, email: string): Promise<(AccountRow & { password_hash: string | null }) | null> {
  const [row] = await db<(AccountRow & { password_hash: string | null })[]>`
    select id, email, balance_micros, created_at, password_hash from accounts where lower(email) = lower(${email})`;
  return row ?? null;
}

export async function getAccount(db: Db, id: string): Promise<AccountRow | null> {
  const [row] = await db<AccountRow[]>`select id, email, balance_micros, created_at from accounts where id = ${id}`;
  return row ?? null;
}
