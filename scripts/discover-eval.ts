// `npm run discover:eval`: recall@5 and MRR of discovery over the catalog in DATABASE_URL (import it
// first: npm run directory:import) on nineteen sets: docs/discovery-devset.json,
// docs/discovery-everyday.json, docs/discovery-everyday-2.json, docs/discovery-everyday-3.json, docs/discovery-everyday-4.json, docs/discovery-everyday-5.json, docs/discovery-everyday-6.json, docs/discovery-everyday-7.json, docs/discovery-everyday-8.json, docs/discovery-everyday-9.json, docs/discovery-everyday-10.json, docs/discovery-everyday-11.json, docs/discovery-everyday-12.json, docs/discovery-everyday-13.json, docs/discovery-everyday-14.json, docs/discovery-everyday-15.json and docs/discovery-everyday-16.json (issue 35's; tuned on), docs/discovery-heldout.json (the first held-out set) and
// docs/discovery-fresh.json (issue 19's held-out set, committed before any ranking change for it;
// never tune on it). Misses are printed for the tuning sets only (--show-heldout-misses for all);
// --sets=devset,everyday,everyday-2,everyday-3,everyday-4,everyday-5,everyday-6,everyday-7,everyday-8,everyday-9,everyday-10,everyday-11,everyday-12,everyday-13,everyday-14,everyday-15,everyday-16 runs only the named sets.
import { fileURLToPath } from 'node:url';
import { directorySettings, evaluateDiscovery, LiveDirectoryIndex, loadDevset, modelDirSetting } from '#core/directory';
import { parseSettings, sharedSettings } from '#core/platform';
import { createSql } from '#db/sql';

const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true }).extend(directorySettings.pick({ DISCOVERY_MODEL_DIR: true }).shape));
const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'discover-eval' });
const index = new LiveDirectoryIndex(
  sql,
  { warn: (object, message) => console.warn(message, object) },
  { modelDir: modelDirSetting(settings.DISCOVERY_MODEL_DIR) },
);
try {
  const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`select count(*)::int as n from apis`;
  console.log(`catalog: ${n} APIs`);
  const only = process.argv
    .find((a) => a.startsWith('--sets='))
    ?.slice('--sets='.length)
    .split(',');
  for (const set of [
    'devset',
    'everyday',
    'everyday-2',
    'everyday-3',
    'everyday-4',
    'everyday-5',
    'everyday-6',
    'everyday-7',
    'everyday-8',
    'everyday-9',
    'everyday-10',
    'everyday-11',
    'everyday-12',
    'everyday-13',
    'everyday-14',
    'everyday-15',
    'everyday-16',
    'heldout',
    'fresh',
  ].filter((s) => !only || only.includes(s))) {
    const tasks = await loadDevset(fileURLToPath(new URL(`../docs/discovery-${set}.json`, import.meta.url)));
    const result = await evaluateDiscovery(sql, index, tasks);
    // The held-out sets print their figures only: reading their misses is the first step of tuning on them.
    const tuning = set === 'devset' || set.startsWith('everyday');
    if (tuning || process.argv.includes('--show-heldout-misses'))
      for (const miss of result.misses)
        console.log(`  miss: "${miss.q}"\n    expected one of ${miss.expected.join(', ')}\n    got ${miss.got.join(', ')}`);
    if (result.unknownExpected.length) console.log(`  expected ids not in the catalog: ${result.unknownExpected.join(', ')}`);
    console.log(
      `${set} (${result.tasks} tasks): recall@1 ${result.recallAt1.toFixed(3)}  recall@5 ${result.recallAt5.toFixed(3)}  MRR ${result.mrr.toFixed(3)}`,
    );
  }
} finally {
  await index.close();
  await sql.end({ timeout: 5 });
}
