import type { Redis } from 'ioredis';
import { z } from 'zod';
import { apiOAuthSchema, authSchemeSchema, type ApiOAuth, type AuthScheme } from '#contracts/auth-scheme';
import type { Db, Sql } from './sql.js';

/** Channel on which an API row change is announced to every edge (which caches the rows it proxies to). */
export const apiChangesChannel = (redisPrefix: string) => `${redisPrefix}:api-changes`;

/** Tells every edge instance to drop its cached copy of an API row ('*' drops all). Call after changing a row. */
export async function publishApiChange(redis: Redis, redisPrefix: string, apiId: string): Promise<void> {
  await redis.publish(apiChangesChannel(redisPrefix), apiId);
}

/**
 * The proxy's view of a directory API (the `apis` table of 00002): where it lives, how the upstream
 * expects its key, and what a call costs. Operators write these rows with `npm run api`.
 */
export { apiOAuthSchema, authSchemeSchema, type ApiOAuth, type AuthScheme };

export const pricingRuleSchema = z.object({
  /** HTTP method, or '*' / absent for any. */
  method: z.string().max(10).optional(),
  /** Path under the base URL; a trailing '*' matches any remainder. */
  path: z.string().min(1).max(500),
  priceMicros: z.coerce.bigint().nonnegative(),
});
export type PricingRule = z.output<typeof pricingRuleSchema>;

export interface MeteredApi {
  id: string;
  name: string;
  baseUrl: string;
  authScheme: AuthScheme;
  /** The OAuth 2 flows and scopes its description declares (migration 00027); null without OAuth 2. */
  oauth: ApiOAuth | null;
  /** Who issues its tokens (the authorization server's host): the key of the OAuth app that serves it. */
  oauthProvider: string | null;
  /** Where a caller gets a key of their own (an https documentation link), when known. */
  keyDocsUrl: string | null;
  priceMicros: bigint;
  byokPriceMicros: bigint | null;
  pricingRules: PricingRule[];
  platformKeyEncrypted: Buffer | null;
  source: string;
}

interface ApiRow {
  id: string;
  name: string;
  base_url: string;
  auth_scheme: unknown;
  oauth: unknown;
  oauth_provider: string | null;
  key_docs_url: string | null;
  price_micros: bigint;
  byok_price_micros: bigint | null;
  pricing_rules: unknown;
  platform_key_encrypted: Buffer | null;
  source: string;
}

const COLUMNS =
  'id, name, base_url, auth_scheme, oauth, oauth_provider, key_docs_url, price_micros, byok_price_micros, pricing_rules, platform_key_encrypted, source';

function fromRow(row: ApiRow): MeteredApi {
  const scheme = authSchemeSchema.safeParse(row.auth_scheme);
  const rules = z.array(pricingRuleSchema).safeParse(row.pricing_rules);
  const oauth = row.oauth === null ? null : apiOAuthSchema.safeParse(row.oauth);
  return {
    id: row.id,
    name: row.name,
    baseUrl: row.base_url,
    // An unknown scheme in imported data means "send no key", never a crash on the request path.
    authScheme: scheme.success ? scheme.data : { type: 'none' },
    // An OAuth description that does not parse is as good as none: the API cannot be connected.
    oauth: oauth?.success ? oauth.data : null,
    oauthProvider: oauth?.success ? row.oauth_provider : null,
    keyDocsUrl: row.key_docs_url,
    priceMicros: row.price_micros,
    byokPriceMicros: row.byok_price_micros,
    pricingRules: rules.success ? rules.data : [],
    platformKeyEncrypted: row.platform_key_encrypted,
    source: row.source,
  };
}

export async function getMeteredApi(db: Db, id: string): Promise<MeteredApi | null> {
  const [row] = await db<ApiRow[]>`select ${db.unsafe(COLUMNS)} from apis where id = ${id}`;
  return row ? fromRow(row) : null;
}

export async function listMeteredApis(db: Db, options: { source?: string } = {}): Promise<MeteredApi[]> {
  const rows = options.source
    ? await db<ApiRow[]>`select ${db.unsafe(COLUMNS)} from apis where source = ${options.source} order by id`
    : await db<ApiRow[]>`select ${db.unsafe(COLUMNS)} from apis order by id`;
  return rows.map(fromRow);
}

export interface OperatorApiInput {
  id: string;
  name: string;
  provider?: string;
  baseUrl: string;
  authScheme: AuthScheme;
  priceMicros: bigint;
  byokPriceMicros?: bigint | null;
  pricingRules?: PricingRule[];
  categories?: string[];
  description?: string;
  oauth?: ApiOAuth | null;
  oauthProvider?: string | null;
  keyDocsUrl?: string | null;
}

const rulesJson = (rules: PricingRule[]) => rules.map((r) => ({ ...r, priceMicros: r.priceMicros.toString() }));

/** Inserts an operator API; returns false when the id exists. */
export async function insertOperatorApi(db: Db, input: OperatorApiInput): Promise<boolean> {
  const rows = await db`
    insert into apis (id, name, provider, base_url, auth_scheme, oauth, oauth_provider, key_docs_url,
                      price_micros, byok_price_micros, pricing_rules, categories, description, source)
    values (${input.id}, ${input.name}, ${input.provider ?? input.name}, ${input.baseUrl}, ${db.json(input.authScheme)},
            ${input.oauth ? db.json(input.oauth) : null}::jsonb, ${input.oauthProvider ?? null}, ${input.keyDocsUrl ?? null},
            ${input.priceMicros}, ${input.byokPriceMicros ?? null}, ${db.json(rulesJson(input.pricingRules ?? []))},
            ${input.categories ?? []}, ${input.description ?? ''}, 'operator')
    on conflict (id) do nothing
    returning id`;
  return rows.length === 1;
}

export interface ApiUpdate {
  name?: string;
  baseUrl?: string;
  authScheme?: AuthScheme;
  priceMicros?: bigint;
  byokPriceMicros?: bigint | null;
  pricingRules?: PricingRule[];
  /** The OAuth description and its provider, set together; null clears both. */
  oauth?: { oauth: ApiOAuth; provider: string } | null;
  /** Null clears it. */
  keyDocsUrl?: string | null;
}

/** Updates the given fields; returns false when the API does not exist. */
export async function updateApi(db: Db, id: string, update: ApiUpdate): Promise<boolean> {
  const rows = await db`
    update apis set
      name = coalesce(${update.name ?? null}, name),
      base_url = coalesce(${update.baseUrl ?? null}, base_url),
      auth_scheme = coalesce(${update.authScheme ? db.json(update.authScheme) : null}::jsonb, auth_scheme),
      price_micros = coalesce(${update.priceMicros ?? null}::bigint, price_micros),
      byok_price_micros = case when ${update.byokPriceMicros !== undefined} then ${update.byokPriceMicros ?? null}::bigint else byok_price_micros end,
      pricing_rules = coalesce(${update.pricingRules ? db.json(rulesJson(update.pricingRules)) : null}::jsonb, pricing_rules),
      oauth = case when ${update.oauth !== undefined} then ${update.oauth ? db.json(update.oauth.oauth) : null}::jsonb else oauth end,
      oauth_provider = case when ${update.oauth !== undefined} then ${update.oauth?.provider ?? null}::text else oauth_provider end,
      key_docs_url = case when ${update.keyDocsUrl !== undefined} then ${update.keyDocsUrl ?? null}::text else key_docs_url end,
      updated_at = now()
    where id = ${id}
    returning id`;
  return rows.length === 1;
}

/**
 * Deletes an operator API: its connections, stored vectors and connect requests go with it by cascade, its
 * votes here (they name it by id); usage events and ledger rows keep its id as history. An imported API is
 * refused: the next import would bring it back. The row is read under a lock first, so a removal that finds
 * nothing to remove changes nothing (and two at once agree: one removes, the other finds it missing).
 */
export async function removeOperatorApi(sql: Sql, id: string): Promise<'removed' | 'imported' | 'missing'> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ source: string }[]>`select source from apis where id = ${id} for update`;
    if (!row) return 'missing';
    if (row.source !== 'operator') return 'imported';
    await tx`delete from votes where target_type = 'api' and target_id = ${id}`;
    await tx`delete from apis where id = ${id}`;
    return 'removed';
  });
}

export async function setPlatformKey(db: Db, id: string, sealed: Buffer | null): Promise<boolean> {
  const rows = await db`update apis set platform_key_encrypted = ${sealed}, updated_at = now() where id = ${id} returning id`;
  return rows.length === 1;
}
