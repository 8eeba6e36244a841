import { deleteConnection, upsertConnection, type Connection } from '#db/connections';
import { getMeteredApi } from '#db/metered-apis';
import type { Db } from '#db/sql';
import { connectionContext, keyHint, notFound, openSecret, sealSecret } from '#core/platform';

export type { Connection };
export { listConnections } from '#db/connections';
import type { SealedConnectionKeys } from './connection-cache.js';

/**
 * Bring-your-own-key connections: the caller's key for a third-party API, sealed (AES-256-GCM) under
 * the connections master key and bound to the account and API, so a sealed value copied to another
 * row does not open.
 */
export async function saveConnection(db: Db, masterKey: Buffer, input: { accountId: string; apiId: string; apiKey: string }): Promise<Connection> {
  const sealed = sealSecret(masterKey, input.apiKey, connectionContext(input.accountId, input.apiId));
  return upsertConnection(db, { accountId: input.accountId, apiId: input.apiId, sealed, keyHint: keyHint(input.apiKey) });
}

/** Connects the account to a directory API with its own key (replacing an earlier one); an unknown API is 404. */
export async function connectApi(db: Db, masterKey: Buffer, input: { accountId: string; apiId: string; apiKey: string }): Promise<Connection> {
  const api = await getMeteredApi(db, input.apiId);
  if (!api) throw notFound(`API ${input.apiId}`, 'List APIs with GET /api/v1/apis.');
  return saveConnection(db, masterKey, { ...input, apiId: api.id });
}

/** Deletes the account's key for an API; null when there was none. */
export async function disconnectApi(db: Db, accountId: string, apiId: string): Promise<Connection | null> {
  return deleteConnection(db, accountId, apiId);
}

/** The caller's decrypted key for an API, or null when they have not connected one. */
export async function connectionKey(keys: SealedConnectionKeys, masterKey: Buffer, accountId: string, apiId: string): Promise<string | null> {
  const sealed = await keys.sealedKey(accountId, apiId);
  return sealed ? openSecret(masterKey, sealed, connectionContext(accountId, apiId)) : null;
}
