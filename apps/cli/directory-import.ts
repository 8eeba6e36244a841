// `npm run directory:import [-- --force]`: imports the APIs.guru directory in-process, printing progress.
import { directorySettings } from '#core/directory';
import { importDirectory, loadCuration, modelDirSetting } from '#core/directory';
import { parseDollars } from '#contracts/money';
import { parseSettings, sharedSettings } from '#core/platform';
import { createSql } from '#db/sql';

const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true }).extend(directorySettings.shape));
const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'directory-import' });
const started = Date.now();
try {
  const result = await importDirectory(sql, {
    defaultPriceMicros: parseDollars(settings.DIRECTORY_DEFAULT_PRICE) ?? 1000n,
    curation: await loadCuration(settings.DIRECTORY_CURATION_FILE),
    connectionsMasterKey: settings.CONNECTIONS_MASTER_KEY,
    force: process.argv.includes('--force'),
    progressEvery: 200,
    modelDir: modelDirSetting(settings.DISCOVERY_MODEL_DIR),
    log: (line) => console.log(`[directory] ${line}`),
  });
  console.log(`[directory] finished in ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(result)}`);
  if (result.failed > 0) process.exitCode = 1;
} finally {
  await sql.end({ timeout: 5 });
}
