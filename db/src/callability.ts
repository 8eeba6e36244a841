import type { Db } from './sql.js';

/**
 * What decides whether an API can be called, as stored: its auth scheme's type, whether the
 * operator has a platform key for it, its OAuth 2 provider and flows, and where to get a key.
 */
export interface ApiAccessRow {
  id: string;
  /** `auth_scheme->>'type'`: none, apiKey, bearer, basic, oauth2, or a type the gateway does not know. */
  auth_type: string;
  platform_key: boolean;
  oauth_provider: string | null;
  /** The OAuth 2 flows its description declares (authorizationCode, clientCredentials, ...); null without a description. */
  oauth_flows: string[] | null;
  key_docs_url: string | null;
}

const ACCESS_COLUMNS = (db: Db) => db`
  a.id, coalesce(a.auth_scheme->>'type', 'none') as auth_type, a.platform_key_encrypted is not null as platform_key,
  a.oauth_provider,
  case when jsonb_typeof(a.oauth->'flows') = 'object' then array(select jsonb_object_keys(a.oauth->'flows')) end as oauth_flows,
  a.key_docs_url`;

/**
 * Every API's access facts and the providers the operator registered an OAuth app for, read in one
 * snapshot (about 2,600 short rows).
 */
export async function loadApiAccess(db: Db): Promise<{ apis: ApiAccessRow[]; operatorProviders: string[] }> {
  const [apis, providers] = await Promise.all([
    db<ApiAccessRow[]>`select ${ACCESS_COLUMNS(db)} from apis a order by a.id`,
    db<{ provider: string }[]>`select provider from oauth_apps where account_id is null`,
  ]);
  return { apis, operatorProviders: providers.map((p) => p.provider) };
}

/** What an account holds that makes APIs callable: its keys, its own OAuth apps and its OAuth connections. */
export interface AccountAccessRow {
  kind: 'key' | 'app' | 'oauth';
  /** An API id (key) or a provider (app, oauth). */
  name: string;
  /** OAuth connections: ready or needs_reauth. */
  status: string | null;
  is_default: boolean | null;
}

/** One small indexed query per caller: each table is read by its account index. */
export async function loadAccountAccess(db: Db, accountId: string): Promise<AccountAccessRow[]> {
  return db<AccountAccessRow[]>`
    select 'key' as kind, api_id as name, null::text as status, null::boolean as is_default from connections where account_id = ${accountId}
    union all
    select 'app', provider, null, null from oauth_apps where account_id = ${accountId}
    union all
    select 'oauth', provider, status, is_default from oauth_connections where account_id = ${accountId}`;
}

/** The access facts of some APIs (ids the directory may have gained since a snapshot was read). */
export async function loadApiAccessOf(db: Db, ids: readonly string[]): Promise<ApiAccessRow[]> {
  if (ids.length === 0) return [];
  return db<ApiAccessRow[]>`select ${ACCESS_COLUMNS(db)} from apis a where a.id = any(${[...ids]})`;
}
