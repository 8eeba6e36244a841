import type { Redis } from 'ioredis';
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

const toConnection = (row: ConnectionRow): Connection => ({
  apiId: row.api_id,
  keyHint: row.key_hint,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/** Stores (or replaces) an account's sealed key for an API (core's gateway seals and opens it). */
export async function upsertConnection(db: Db, input: { accountId: string; apiId: string; sealed: Buffer; keyHint: string }): Promise<Connection> {
  const sealed = input.sealed;
  const [row] = await db<ConnectionRow[]>`
    insert into connections (account_id, api_id, key_encrypted, key_hint)
    values (${input.accountId}, ${input.apiId}, ${sealed}, ${input.keyHint})
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

/** The account's sealed key for an API, or null when none is connected. */
export async function findSealedConnectionKey(db: Db, accountId: string, apiId: string): Promise<Buffer | null> {
  const [row] = await db<{ key_encrypted: Buffer }[]>`
    select key_encrypted from connections where account_id = ${accountId} and api_id = ${apiId}`;
  return row?.key_encrypted ?? null;
}

/** Channel on which a connection change is announced to every edge (which caches the sealed keys its proxy uses). */
export const connectionChangesChannel = (redisPrefix: string) => `${redisPrefix}:connection-changes`;

/** The message naming one account's connection to one API ('*' names all). */
export const connectionChangeMessage = (accountId: string, apiId: string) => `${accountId} ${apiId}`;

/** Tells every edge instance to drop its cached copy of a connection. Call after changing the row. */
export async function publishConnectionChange(redis: Redis, redisPrefix: string, accountId: string, apiId: string): Promise<void> {
  await redis.publish(connectionChangesChannel(redisPrefix), connectionChangeMessage(accountId, apiId));
}
