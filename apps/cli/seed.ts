// Seed data, run by `npm run up` (and `npm run seed`) after migrations: loads the platform docs and
// the cookbooks (idempotent upserts) and, when the catalog holds no imported API yet, enqueues the
// directory import for the queue worker. The edge serves meanwhile; the import fills the catalog in
// the background. Each area keeps its own block.
import { fileURLToPath } from 'node:url';
import { loadCookbooks } from '#db/cookbooks';
import { enqueueDirectoryJob } from '#core/directory';
import { loadDocs } from '#db/docs';
import { createRedis } from '#core/platform';
import { parseSettings, sharedSettings } from '#core/platform';
import { createSql } from '#db/sql';

const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true, REDIS_URL: true, REDIS_PREFIX: true }));
const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'seed' });
try {
  // --- docs (db/seed/docs/*.md) ---
  const docs = await loadDocs(sql, fileURLToPath(new URL('../../db/seed/docs', import.meta.url)));
  console.log(`[seed] ${docs} doc sections loaded`);

  // --- cookbooks (db/seed/cookbooks/*.json) ---
  const cookbooks = await loadCookbooks(sql);
  console.log(`[seed] ${cookbooks} cookbooks loaded`);

  // --- directory (the APIs.guru catalog, imported by the queue worker) ---
  const [counted] = await sql<{ imported: number }[]>`select count(*)::int as imported from apis where source = 'apis.guru'`;
  const imported = counted?.imported ?? 0;
  if (imported === 0) {
    const redis = createRedis(settings.REDIS_URL, 'queue');
    try {
      const jobId = await enqueueDirectoryJob(redis, settings.REDIS_PREFIX, { kind: 'import-all' });
      console.log(`[seed] the catalog is empty: directory import enqueued (job ${jobId}); the queue worker fills it in the background`);
    } finally {
      await redis.quit();
    }
  } else {
    console.log(`[seed] the catalog holds ${imported} imported APIs (re-import: npm run directory:import)`);
  }
} finally {
  await sql.end({ timeout: 5 });
}
