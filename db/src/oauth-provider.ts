import type { Db, Sql } from './sql.js';

// The storage of the platform's own authorization server (oidc-provider, apps/edge/src/oauth2):
// its models in oauth_provider_models (one row per model instance, keyed by kind and id) and its
// sealed secrets in oauth_provider_secrets. The provider decides what a payload holds; these
// functions only store and find it.

/** A model instance as oidc-provider hands it to its adapter (an "AdapterPayload"). */
export type ProviderPayload = Record<string, unknown> & {
  grantId?: string;
  userCode?: string;
  uid?: string;
  consumed?: unknown;
};

export async function upsertProviderModel(db: Db, kind: string, id: string, payload: ProviderPayload, expiresInSeconds: number | undefined) {
  const expiresAt = expiresInSeconds === undefined ? null : new Date(Date.now() + expiresInSeconds * 1000);
  await db`
    insert into oauth_provider_models (kind, id, payload, grant_id, user_code, uid, expires_at)
    values (${kind}, ${id}, ${db.json(payload as never)}, ${payload.grantId ?? null}, ${payload.userCode ?? null}, ${payload.uid ?? null}, ${expiresAt})
    on conflict (kind, id) do update
       set payload = excluded.payload, grant_id = excluded.grant_id, user_code = excluded.user_code,
           uid = excluded.uid, expires_at = excluded.expires_at`;
}

type Found = { payload: ProviderPayload; consumed_at: Date | null };

/** A stored payload not yet expired (with `consumed` set when it was), or undefined. */
function present(row: Found | undefined): ProviderPayload | undefined {
  if (!row) return undefined;
  return row.consumed_at === null ? row.payload : { ...row.payload, consumed: Math.floor(row.consumed_at.getTime() / 1000) };
}

export async function findProviderModel(db: Db, kind: string, id: string): Promise<ProviderPayload | undefined> {
  const [row] = await db<Found[]>`
    select payload, consumed_at from oauth_provider_models
     where kind = ${kind} and id = ${id} and (expires_at is null or expires_at > now())`;
  return present(row);
}

export async function findProviderModelByUid(db: Db, kind: string, uid: string): Promise<ProviderPayload | undefined> {
  const [row] = await db<Found[]>`
    select payload, consumed_at from oauth_provider_models
     where kind = ${kind} and uid = ${uid} and (expires_at is null or expires_at > now())`;
  return present(row);
}

export async function findProviderModelByUserCode(db: Db, kind: string, userCode: string): Promise<ProviderPayload | undefined> {
  const [row] = await db<Found[]>`
    select payload, consumed_at from oauth_provider_models
     where kind = ${kind} and user_code = ${userCode} and (expires_at is null or expires_at > now())`;
  return present(row);
}

export async function consumeProviderModel(db: Db, kind: string, id: string): Promise<void> {
  await db`update oauth_provider_models set consumed_at = now() where kind = ${kind} and id = ${id}`;
}

export async function destroyProviderModel(db: Db, kind: string, id: string): Promise<void> {
  await db`delete from oauth_provider_models where kind = ${kind} and id = ${id}`;
}

/**
 * Every model of a grant: the grant itself, its codes and its tokens (oidc-provider's
 * revokeByGrantId). With `keepAccessTokens`, its access tokens stay until they expire, marked
 * consumed (no longer valid anywhere), so the MCP endpoint can still tell a client presenting one
 * that its access was revoked (403 key_revoked) rather than that the token is unknown.
 */
export async function revokeProviderGrant(db: Db, grantId: string, options: { keepAccessTokens?: boolean } = {}): Promise<void> {
  if (options.keepAccessTokens) {
    await db`update oauth_provider_models set consumed_at = coalesce(consumed_at, now()) where grant_id = ${grantId} and kind = 'AccessToken'`;
    await db`delete from oauth_provider_models where (grant_id = ${grantId} and kind <> 'AccessToken') or (kind = 'Grant' and id = ${grantId})`;
    return;
  }
  await db`delete from oauth_provider_models where grant_id = ${grantId} or (kind = 'Grant' and id = ${grantId})`;
}

/** Rows expired before `before`, at most `batch` of them. */
export async function pruneProviderModels(db: Db, before: Date, batch: number): Promise<number> {
  const deleted = await db`
    delete from oauth_provider_models where (kind, id) in (
      select kind, id from oauth_provider_models where expires_at < ${before} limit ${batch})`;
  return deleted.count;
}

/**
 * The sealed secret named `name`, made by `create` (and stored) when there is none yet. Two
 * instances starting at once both create one; the first insert wins and both read it back.
 */
export async function providerSecret(sql: Sql, name: string, create: () => Buffer): Promise<Buffer> {
  const [existing] = await sql<{ sealed: Buffer }[]>`select sealed from oauth_provider_secrets where name = ${name}`;
  if (existing) return existing.sealed;
  await sql`insert into oauth_provider_secrets (name, sealed) values (${name}, ${create()}) on conflict (name) do nothing`;
  const [row] = await sql<{ sealed: Buffer }[]>`select sealed from oauth_provider_secrets where name = ${name}`;
  if (!row) throw new Error(`oauth provider secret ${name} vanished`);
  return row.sealed;
}

/** Every sealed provider secret, locked (master key rotation). */
export async function lockProviderSecrets(db: Db): Promise<Array<{ name: string; sealed: Buffer }>> {
  return db<{ name: string; sealed: Buffer }[]>`select name, sealed from oauth_provider_secrets order by name for update`;
}

export async function setProviderSecret(db: Db, name: string, sealed: Buffer): Promise<void> {
  await db`update oauth_provider_secrets set sealed = ${sealed} where name = ${name}`;
}
