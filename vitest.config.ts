import { defineConfig } from 'vitest/config';

// Two projects, both run by `npm test` (scripts/test.sh):
// - unit: pure logic in test/unit/, no services and no global setup (`npm run test:unit`, seconds);
// - integration: everything else, against the real Postgres, Redis and Temporal that scripts/test.sh provisions.
//
// Four worker processes on two cores: most integration files wait (on Temporal, timers, a browser, child
// processes) more than they compute. And a worker keeps its module cache from file to file (isolate: false):
// evaluating the core again for every file was a third of the suite's time. Each file still gets its own
// database (the setup file runs again before every file) and builds its own apps. Measured on a two-core
// Xeon (docs/decisions/test-workers-share-modules.md): 500 s with two isolated workers, 375 s with four,
// 261 s with four sharing modules. TEST_WORKERS and TEST_ISOLATE=1 bring the old way back to compare.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: Number(process.env.TEST_WORKERS ?? 4),
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        // Pure tests share one module cache per worker (no isolation): importing core once is most of their time.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**'],
          globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/directory-setup.ts', 'test/helpers/dashboard-build.ts'],
          // Each test file gets its own database cloned from the migrated template (see own-database.ts).
          setupFiles: ['test/helpers/own-database.ts'],
          isolate: process.env.TEST_ISOLATE === '1',
        },
      },
    ],
  },
});
