// `npx tsx db/src/cli/seed.ts` (run by `npm run up`): loads the repository's seed data into DATABASE_URL.
// Each area keeps its own clearly separated block below.
import { parseSettings, sharedSettings } from '../settings.js';
import { createSql } from '../sql.js';

const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true }));
const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'seed' });
try {
  // --- cookbooks (db/seed/cookbooks/*.json) ---
  {
    const { loadCookbooks } = await import('../cookbooks.js');
    const count = await loadCookbooks(sql);
    console.log(`[seed] cookbooks: ${count} loaded`);
  }
} finally {
  await sql.end({ timeout: 5 });
}
