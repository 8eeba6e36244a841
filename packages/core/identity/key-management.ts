import { revokeProviderGrant } from '#db/oauth-provider';
import { PlatformError, notFound } from '#core/platform';
import { KEY_COLUMNS, type KeyKind, type KeyRow, type KeyStatus } from '#db/keys';
import type { Db, Sql } from '#db/sql';

export interface KeyPage {
  keys: KeyRow[];
  /** The id of the last key of this page when more follow, else null. */
  nextCursor: string | null;
}

/**
 * One page of an account's keys of one kind, newest first. The cursor is the id of the last key of
 * the previous page (keys are never deleted, so it always resolves); an unknown cursor is a 400.
 */
export async function listKeys(
  db: Db,
  input: { accountId: string; kind: KeyKind; limit: number; cursor?: string | null; includeRevoked: boolean },
): Promise<KeyPage> {
  const cursor = input.cursor ?? null;
  if (cursor !== null) {
    const [anchor] = await db`select 1 from api_keys where id = ${cursor} and account_id = ${input.accountId} and kind = ${input.kind}`;
    if (!anchor) throw new PlatformError('validation_failed', 'Unknown cursor', { hint: 'Pass the nextCursor of the previous page unchanged.' });
  }
  const rows = await db<KeyRow[]>`
    select ${db.unsafe(KEY_COLUMNS)} from api_keys
     where account_id = ${input.accountId} and kind = ${input.kind}
       ${input.includeRevoked ? db`` : db`and status <> 'revoked'`}
       ${cursor === null ? db`` : db`and (created_at, id) < (select created_at, id from api_keys where id = ${cursor})`}
     order by created_at desc, id desc
     limit ${input.limit + 1}`;
  const more = rows.length > input.limit;
  const keys = more ? rows.slice(0, input.limit) : rows;
  return { keys, nextCursor: more ? (keys.at(-1)?.id ?? null) : null };
}

export interface KeyChange {
  name?: string | undefined;
  status?: KeyStatus | undefined;
}

/**
 * Applies a change to one of the account's keys under a row lock, following the key state machine:
 * enabled <-> disabled, enabled or disabled -> revoked (permanent), rename in any state but revoked.
 * A key of another account, of another kind, or that does not exist is 404 (never another account's
 * data); any change to a revoked key is 409.
 */
export async function changeKey(sql: Sql, input: { accountId: string; kind: KeyKind; keyId: string; change: KeyChange }): Promise<KeyRow> {
  const what = input.kind === 'agent' ? 'Agent key' : 'API key';
  return sql.begin(async (tx) => {
    const [current] = await tx<{ status: KeyStatus }[]>`
      select status from api_keys where id = ${input.keyId} and account_id = ${input.accountId} and kind = ${input.kind} for update`;
    if (!current) throw notFound(what, `List yours with GET /api/v1/${input.kind === 'agent' ? 'agent-keys' : 'keys'}.`);
    if (current.status === 'revoked') {
      throw new PlatformError('conflict', `${what} ${input.keyId} is revoked and cannot be changed`, {
        hint: 'Revocation is permanent; create a new key instead.',
      });
    }
    const { name, status } = input.change;
    const [key] = await tx<KeyRow[]>`
      update api_keys
         set name = ${name ?? tx`name`},
             status = ${status ?? tx`status`},
             revoked_at = ${status === 'revoked' ? tx`now()` : tx`revoked_at`},
             updated_at = now()
       where id = ${input.keyId}
      returning ${tx.unsafe(KEY_COLUMNS)}`;
    if (!key) throw new Error('locked key vanished');
    // An MCP client's grant dies with its key: the grant, its codes and its refresh tokens go; its
    // access tokens are marked consumed (and the MCP endpoint checks the key on every request anyway).
    if (status === 'revoked' && key.oauth_grant_id !== null) await revokeProviderGrant(tx, key.oauth_grant_id, { keepAccessTokens: true });
    return key;
  }) as Promise<KeyRow>;
}
