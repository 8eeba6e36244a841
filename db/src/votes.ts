/**
 * Votes on APIs and cookbooks: one row per account and target (changing a vote updates it,
 * removing deletes it). Tallies are counted from the rows, so concurrent votes cannot drift them.
 */
import type { Db } from './sql.js';

export type VoteTarget = 'api' | 'cookbook';

export interface Tally {
  up: number;
  down: number;
  score: number;
}

export async function cookbookExists(db: Db, id: string): Promise<boolean> {
  const [row] = await db`select 1 from cookbooks where id = ${id}`;
  return row !== undefined;
}

export async function targetExists(db: Db, targetType: VoteTarget, targetId: string): Promise<boolean> {
  if (targetType === 'cookbook') return cookbookExists(db, targetId);
  const [row] = await db`select 1 from apis where id = ${targetId}`;
  return row !== undefined;
}

export async function tally(db: Db, targetType: VoteTarget, targetId: string): Promise<Tally> {
  const [row] = await db<{ up: number; down: number }[]>`
    select count(*) filter (where value = 1)::int as up, count(*) filter (where value = -1)::int as down
      from votes where target_type = ${targetType} and target_id = ${targetId}`;
  const up = row?.up ?? 0;
  const down = row?.down ?? 0;
  return { up, down, score: up - down };
}

/** Casts or changes the account's vote (one statement: safe under concurrency). */
export async function castVote(db: Db, accountId: string, targetType: VoteTarget, targetId: string, value: 1 | -1): Promise<void> {
  await db`
    insert into votes (account_id, target_type, target_id, value)
    values (${accountId}, ${targetType}, ${targetId}, ${value})
    on conflict (account_id, target_type, target_id) do update set value = excluded.value, updated_at = now()`;
}

/** Removes the account's vote; returns the value it had, or null when there was none. */
export async function removeVote(db: Db, accountId: string, targetType: VoteTarget, targetId: string): Promise<1 | -1 | null> {
  const [row] = await db<{ value: number }[]>`
    delete from votes where account_id = ${accountId} and target_type = ${targetType} and target_id = ${targetId} returning value`;
  return row ? (row.value as 1 | -1) : null;
}

export async function myVote(db: Db, accountId: string, targetType: VoteTarget, targetId: string): Promise<1 | -1 | null> {
  const [row] = await db<{ value: number }[]>`
    select value from votes where account_id = ${accountId} and target_type = ${targetType} and target_id = ${targetId}`;
  return row ? (row.value as 1 | -1) : null;
}
