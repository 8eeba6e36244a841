// `npm run test:durations`: records how long each test file took in this checkout's last run of the
// suite (vitest's own cache of it) in test/helpers/file-durations.json, which the suite's sequencer
// reads on a clean clone to start the longest files first (test/helpers/longest-first-sequencer.ts).
// Run it after a full `npm test` when files were added or their times changed much; commit the file.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const CACHE = join(ROOT, 'node_modules/.vite/vitest');
const OUT = join(ROOT, 'test/helpers/file-durations.json');

interface Results {
  results: Array<[string, { duration?: number; failed?: boolean }]>;
}

const caches = (() => {
  try {
    return readdirSync(CACHE).map((dir) => join(CACHE, dir, 'results.json'));
  } catch {
    return [];
  }
})();
const seconds: Record<string, number> = {};
for (const file of caches) {
  let parsed: Results;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Results;
  } catch {
    continue;
  }
  for (const [key, result] of parsed.results) {
    if (typeof result.duration === 'number' && result.duration > 0) seconds[key] = Math.round(result.duration / 100) / 10;
  }
}
if (Object.keys(seconds).length === 0) {
  console.error('[test:durations] no recorded run: run `npm test` first (vitest keeps its results in node_modules/.vite/vitest)');
  process.exit(1);
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(
  OUT,
  `${JSON.stringify({ about: 'Seconds per test file in a full run (npm run test:durations); the sequencer starts the longest first.', seconds: sorted }, null, 2)}\n`,
);
console.log(`[test:durations] ${Object.keys(sorted).length} files written to test/helpers/file-durations.json`);
