import type { Db } from './sql.js';

export interface AccountRow {
  id: string;
  email: string;
  balance_micros: bigint;
  created_at: Date;
}

/**
 * Creates an account; returns null when the email (compared case-insensitively) is taken, by another
 * account or by an approver of one (an address signs in as one identity).
 */
export async function createAccount(db: Db, input: { email: string; passwordHash: string | null }): Promise<AccountRow | null> {
  const rows = await db<AccountRow[]>`
    insert into accounts (email, password_hash)
    select ${input.email}, ${input.passwordHash}
     where not exists (select 1 from account_members where lower(email) = lower(${input.email}) and removed_at is null)
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
