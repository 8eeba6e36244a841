import { markFirstUse, readFirstUse } from '#db/first-use';
import type { Db } from '#db/sql';

/** The dashboard's first-run checklist, in the order a new user meets it. */
export const CHECKLIST_ITEMS = ['copy_key', 'discover', 'first_call', 'add_funds'] as const;
export type ChecklistItemId = (typeof CHECKLIST_ITEMS)[number];

export interface FirstUseChecklist {
  items: { id: ChecklistItemId; done: boolean }[];
  /** Every item done: the dashboard stops showing the checklist. */
  done: boolean;
  /** The owner closed the checklist before finishing it. */
  dismissed: boolean;
}

/**
 * Each item from the account's state: the key copied from the dashboard or used by a request; an API
 * searched, discovered or looked up with the account's credentials (or called: a call found one);
 * a paid call through the proxy; funds added. Once every item is done the checklist is recorded as
 * completed and never worked out again, so an item undone later (a key revoked) does not bring it back.
 */
export async function firstUseChecklist(sql: Db, accountId: string): Promise<FirstUseChecklist> {
  const row = await readFirstUse(sql, accountId);
  const dismissed = row.dismissed_at !== null;
  if (row.completed_at !== null) return { items: CHECKLIST_ITEMS.map((id) => ({ id, done: true })), done: true, dismissed };
  const done: Record<ChecklistItemId, boolean> = {
    copy_key: row.key_copied_at !== null || row.key_used,
    discover: row.discovered_at !== null || row.paid_call,
    first_call: row.paid_call,
    add_funds: row.topped_up,
  };
  const all = CHECKLIST_ITEMS.every((id) => done[id]);
  if (all) await markFirstUse(sql, accountId, 'completed');
  return { items: CHECKLIST_ITEMS.map((id) => ({ id, done: done[id] })), done: all, dismissed };
}

/** The owner copied their key (or a command holding it) from the dashboard, or closed the checklist. */
export async function markChecklist(sql: Db, accountId: string, mark: 'key_copied' | 'dismissed'): Promise<FirstUseChecklist> {
  await markFirstUse(sql, accountId, mark);
  return firstUseChecklist(sql, accountId);
}

/** Accounts whose first discovery this process has recorded already (per database), so later searches write nothing. */
const discoveredSeen = new WeakMap<Db, Set<string>>();
const SEEN_LIMIT = 50_000;

/**
 * Notes that the account searched or discovered an API, at most one write per account and process.
 * Never fails the request it rides on: a failed write is forgotten and tried on the next search.
 */
export function noteDiscovery(sql: Db, accountId: string, onError: (error: unknown) => void): void {
  let seen = discoveredSeen.get(sql);
  if (!seen) discoveredSeen.set(sql, (seen = new Set()));
  if (seen.has(accountId)) return;
  if (seen.size >= SEEN_LIMIT) seen.clear();
  seen.add(accountId);
  markFirstUse(sql, accountId, 'discovered').catch((error: unknown) => {
    seen.delete(accountId);
    onError(error);
  });
}
