import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { embedCatalog, importDirectory, loadCuration, loadEmbedder, modelDirSetting } from '#core/directory';
import { loadDocs } from '#db/docs';
import { createSql, type Sql } from '#db/sql';
import { testDatabaseUrl } from './settings.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs once before the suite (after migrations): imports the FULL APIs.guru catalog (about 10 s;
 * a no-op when the test database already holds it), computes the vectors of discovery's dense
 * retrieval and loads the docs, so directory, discovery and docs tests run against the real data.
 */
export default async function setup(): Promise<void> {
  const sql = createSql(testDatabaseUrl(), { max: 2, appName: 'test-setup' });
  const log = (line: string) => {
    if (line.startsWith('embed') || line.startsWith('API embeddings')) console.log(`[directory] ${line}`);
  };
  try {
    await importDirectory(sql, {
      defaultPriceMicros: 1000n,
      curation: await loadCuration(fileURLToPath(new URL('../../db/seed/curation.json', import.meta.url))),
      env: {},
      log,
    });
    const modelDir = modelDirSetting(process.env.DISCOVERY_MODEL_DIR ?? '');
    if (modelDir) await embedWithCache(sql, modelDir, log);
    await loadDocs(sql, fileURLToPath(new URL('../../db/seed/docs', import.meta.url)));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The catalog's vectors as the importer computes them (importDirectory with a modelDir: embedCatalog
 * with two threads), with the ones an earlier run computed restored first: embedding all 2,639 APIs
 * takes 20 s of two cores on a quiet machine and minutes on a busy one, before any test starts, and
 * the database is recreated every run. Restored rows go through embedCatalog's own staleness check
 * (text_hash names the model build and the exact text), so an API whose text changed is embedded
 * again; the file's name also covers the embedding code and the CPU (int8 products depend on its
 * instructions), so a change to either starts from nothing. The cache lives in .data/cache/ (git-ignored):
 * a clean clone computes everything. The embedder itself is tested in test/platform/embedder.test.ts.
 */
async function embedWithCache(sql: Sql, modelDir: string, log: (line: string) => void): Promise<void> {
  const manifest = join(modelDir, 'manifest.json');
  const cache = existsSync(manifest) ? embeddingCacheFile(manifest) : undefined;
  let restored = 0;
  if (cache && existsSync(cache)) restored = await restoreEmbeddings(sql, cache);
  let computed: number;
  try {
    const embedder = await loadEmbedder(modelDir, { threads: 2 });
    try {
      computed = await embedCatalog(sql, embedder, log);
    } finally {
      await embedder.close();
    }
  } catch (error) {
    // As the importer does: discovery then ranks by words alone, and its tests say so.
    log(`API embeddings not computed: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  if (restored > 0) log(`embeddings: ${restored} restored from ${cache}, ${computed} computed`);
  if (cache && computed > 0) await saveEmbeddings(sql, cache).catch((error: unknown) => log(`embeddings cache not written: ${String(error)}`));
}

function embeddingCacheFile(manifest: string): string {
  const hash = createHash('sha256')
    .update(readFileSync(manifest))
    .update(cpus()[0]?.model ?? '');
  for (const file of ['embedder.ts', 'wordpiece.ts', 'semantic.ts']) hash.update(readFileSync(join(ROOT, 'packages/core/directory', file)));
  return join(ROOT, '.data', 'cache', `api-embeddings-${hash.digest('hex').slice(0, 16)}.json`);
}

interface CachedEmbedding {
  api_id: string;
  model: string;
  text_hash: string;
  vector: string;
}

async function restoreEmbeddings(sql: Sql, cache: string): Promise<number> {
  let rows: CachedEmbedding[];
  try {
    rows = JSON.parse(readFileSync(cache, 'utf8')) as CachedEmbedding[];
  } catch {
    return 0; // A torn or foreign file: everything is computed.
  }
  const ids = new Set((await sql<{ id: string }[]>`select id from apis`).map((row) => row.id));
  const values = rows
    .filter((row) => ids.has(row.api_id))
    .map((row) => ({ api_id: row.api_id, model: row.model, text_hash: row.text_hash, vector: Buffer.from(row.vector, 'base64') }));
  let inserted = 0;
  for (let at = 0; at < values.length; at += 500) {
    const result =
      await sql`insert into api_embeddings ${sql(values.slice(at, at + 500), 'api_id', 'model', 'text_hash', 'vector')} on conflict (api_id) do nothing`;
    inserted += result.count;
  }
  return inserted;
}

async function saveEmbeddings(sql: Sql, cache: string): Promise<void> {
  const rows = await sql<{ api_id: string; model: string; text_hash: string; vector: Buffer }[]>`
    select api_id, model, text_hash, vector from api_embeddings order by api_id`;
  const out: CachedEmbedding[] = rows.map((row) => ({ ...row, vector: row.vector.toString('base64') }));
  mkdirSync(join(ROOT, '.data', 'cache'), { recursive: true });
  // Written aside and renamed: a run beside this one reads the old file or the new one, never half.
  const partial = `${cache}.${process.pid}.partial`;
  writeFileSync(partial, JSON.stringify(out));
  renameSync(partial, cache);
}
