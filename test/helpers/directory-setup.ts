import { fileURLToPath } from 'node:url';
import { importDirectory, loadCuration, modelDirSetting } from '#core/directory';
import { loadDocs } from '#db/docs';
import { createSql } from '#db/sql';
import { testDatabaseUrl } from './settings.js';

/**
 * Runs once before the suite (after migrations): imports the FULL APIs.guru catalog (about 10 s;
 * a no-op when the test database already holds it) and loads the docs, so directory, discovery and
 * docs tests run against the real data.
 */
export default async function setup(): Promise<void> {
  const sql = createSql(testDatabaseUrl(), { max: 2, appName: 'test-setup' });
  try {
    await importDirectory(sql, {
      defaultPriceMicros: 1000n,
      curation: await loadCuration(fileURLToPath(new URL('../../db/seed/curation.json', import.meta.url))),
      env: {},
      // The vectors of discovery's dense retrieval (about 20 s on a fresh database; then only stale ones).
      modelDir: modelDirSetting(process.env.DISCOVERY_MODEL_DIR ?? ''),
      log: (line) => {
        if (line.startsWith('embed')) console.log(`[directory] ${line}`);
      },
    });
    await loadDocs(sql, fileURLToPath(new URL('../../db/seed/docs', import.meta.url)));
  } finally {
    await sql.end({ timeout: 5 });
  }
}
