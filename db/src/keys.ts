import { generateKey, newId } from '#contracts/key-format';
import type { Db } from './sql.js';

export type KeyKind = 'api' | 'agent';
export type KeyStatus = 'enabled' | 'disabled' | 'revoked';

export interface KeyRow {
  id: string;
  account_id: string;
  kind: KeyKind;
  name: string;
  prefix: string;
  status: KeyStatus;
  spend_limit_micros: bigint | null;
  spent_micros: bigint;
  allowed_apis: string[] | null;
  expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  /** An MCP client's grant (the platform's authorization server): the grant it stands for, and the client. */
  oauth_grant_id: string | null;
  oauth_client_id: string | null;
  oauth_client_name: string | null;
}

/** Every column of a KeyRow (never key_hash). */
export const KEY_COLUMNS = `id, account_id, kind, name, prefix, status, spend_limit_micros, spent_micros, allowed_apis,
  expires_at, created_at, updated_at, last_used_at, revoked_at, oauth_grant_id, oauth_client_id, oauth_client_name`;

export interface NewKey {
  accountId: string;
  kind: KeyKind;
  name: string;
  spendLimitMicros?: bigint | null;
  allowedApis?: string[] | null;
  expiresAt?: Date | null;
  /** An MCP client's grant: the key then stands for it (its own secret is never shown). */
  oauth?: { grantId: string; clientId: string; clientName: string } | null;
}

/** Creates a key and returns its row with the full key, which exists only in this return value. */
export async function createKey(db: Db, input: NewKey): Promise<{ key: KeyRow; fullKey: string }> {
  const generated = generateKey();
  const id = newId(input.kind === 'agent' ? 'agk' : 'key');
  const [key] = await db<KeyRow[]>`
    insert into api_keys (id, account_id, kind, name, prefix, key_hash, spend_limit_micros, allowed_apis, expires_at,
                          oauth_grant_id, oauth_client_id, oauth_client_name)
    values (${id}, ${input.accountId}, ${input.kind}, ${input.name}, ${generated.displayPrefix}, ${generated.hash},
            ${input.spendLimitMicros ?? null}, ${input.allowedApis ?? null}, ${input.expiresAt ?? null},
            ${input.oauth?.grantId ?? null}, ${input.oauth?.clientId ?? null}, ${input.oauth?.clientName ?? null})
    returning ${db.unsafe(KEY_COLUMNS)}`;
  if (!key) throw new Error('insert returned no row');
  return { key, fullKey: generated.fullKey };
}

/** The look-up behind authentication: by SHA-256 of the presented key. */
export async function findKeyByHash(db: Db, hash: Buffer): Promise<KeyRow | null> {
  const [key] = await db<KeyRow[]>`select ${db.unsafe(KEY_COLUMNS)} from api_keys where key_hash = ${hash}`;
  return key ?? null;
}

/** The key an MCP client's grant stands for, or null. */
export async function findKeyByOAuthGrant(db: Db, grantId: string): Promise<KeyRow | null> {
  const [key] = await db<KeyRow[]>`select ${db.unsafe(KEY_COLUMNS)} from api_keys where oauth_grant_id = ${grantId}`;
  return key ?? null;
}

/** Records use of keys in one batched write, so no request writes on its own path. */
/** Keys among `keyIds` that can no longer authenticate (disabled, revoked, expired or deleted). */
export async function unusableKeys(db: Db, keyIds: string[], at: Date = new Date()): Promise<Set<string>> {
  if (keyIds.length === 0) return new Set();
  const rows = await db<{ id: string }[]>`
    select id from api_keys where id = any(${keyIds}) and status = 'enabled' and (expires_at is null or expires_at > ${at})`;
  const usable = new Set(rows.map((row) => row.id));
  return new Set(keyIds.filter((id) => !usable.has(id)));
}

export async function touchKeys(db: Db, keyIds: string[], at: Date = new Date()): Promise<void> {
  if (keyIds.length === 0) return;
  await db`update api_keys set last_used_at = greatest(coalesce(last_used_at, ${at}), ${at}) where id = any(${keyIds})`;
}
