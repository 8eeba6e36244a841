import { createKey, type KeyRow, type NewKey } from '#db/keys';
import type { Sql } from '#db/sql';
import { PlatformError } from '#core/platform';

/**
 * Issues a key within the account's cap on live (not revoked) keys of that kind, so minting keys
 * cannot multiply per-key limits without bound. The account row is locked while counting, so two
 * concurrent issues cannot both take the last place.
 */
export async function issueKey(sql: Sql, input: NewKey, maxLiveKeys: number): Promise<{ key: KeyRow; fullKey: string }> {
  return sql.begin(async (tx) => {
    await tx`select 1 from accounts where id = ${input.accountId} for update`;
    const [row] = await tx<{ n: number }[]>`
      select count(*)::int as n from api_keys where account_id = ${input.accountId} and kind = ${input.kind} and status <> 'revoked'`;
    if ((row?.n ?? 0) >= maxLiveKeys) {
      const what = input.kind === 'agent' ? 'agent keys' : 'API keys';
      throw new PlatformError('conflict', `The account already has ${maxLiveKeys} live ${what}, the most it may have`, {
        hint: `Revoke ${what} you no longer use (DELETE /api/v1/${input.kind === 'agent' ? 'agent-keys' : 'keys'}/{id}), then create this one.`,
      });
    }
    return createKey(tx, input);
  });
}
