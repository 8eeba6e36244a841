import { connectionContext, keyHint, openSecret, sealSecret } from '#core/platform';
import type { Db } from './sql.js';

/** A bring-your-own-key connection as lists show it: never the key, only its hint. */
export interface Connection {
  apiId: string;
  keyHint: string;
  createdAt: Date;
  updatedAt: Date;
}

interface ConnectionRow {
  api_id: string;
  key_hint: string;
  created_at: Date;
  updated_at: Date;
}

const toConnection = (row: ConnectionRow): Connection => ({ apiId: row.api_id, keyHint: row.key_hint, createdAt: row.created_at, updatedAt: row.updated_at });

/** Stores (or replaces) the caller's key for an API, sealed under the master key. */
export async function saveConnection(db: Db, masterKey: Buffer, input: { accountId: string; apiId: string; apiKey: string }): Promise<Connection> {
  const sealed = sealSecret(masterKey, input.apiKey, connectionContext(input.accountId, input.apiId));
  const [row] = await db<ConnectionRow[]>`
    insert into connections (account_id, api_id, key_encrypted, key_hint)
    values (${input.accountId}, ${input.apiId}, ${sealed}, ${keyHint(input.apiKey)})
    on conflict (account_id, api_id) do update
      set key_encrypted = excluded.key_encrypted, key_hint = excluded.key_hint, updated_at = now()
    returning api_id, key_hint, created_at, updated_at`;
  if (!row) throw new Error('insert returned no row');
  return toConnection(row);
}

export async function listConnections(db: Db, accountId: string): Promise<Connection[]> {
  const rows = await db<ConnectionRow[]>`
    select api_id, key_hint, created_at, updated_at from connections where account_id = ${accountId} order by api_id`;
  return rows.map(toConnection);
}

export async function deleteConnection(db: Db, accountId: string, apiId: string): Promise<Connection | null> {
  const [row] = await db<ConnectionRow[]>`
    delete from connections where account_id = ${accountId} and api_id = ${apiId}
    returning api_id, key_hint, created_at, updated_at`;
  return row ? toConnection(row) : null;
}

/** The caller's decrypted key for an API, or null when they have not connected one. */
export async function connectionKey(db: Db, masterKey: Buffer, accountId: string, apiId: string): Promise<string | null> {
  const [row] = await db<{ key_encrypted: Buffer }[]>`
    select key_encrypted from connections where account_id = ${accountId} and api_id = ${apiId}`;
  return row ? openSecret(masterKey, row.key_encrypted, connectionContext(accountId, apiId)) : null;
}
