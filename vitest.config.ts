import { defineConfig } from 'vitest/config';

// Two projects, both run by `npm test` (scripts/test.sh):
// - unit: pure logic in test/unit/, no services and no global setup (`npm run test:unit`, seconds);
// - integration: everything else, against the real Postgres, Redis and Temporal that scripts/test.sh provisions.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
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
        },
      },
    ],
  },
});
