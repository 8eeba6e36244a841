import { defineConfig } from 'vitest/config';

// Tests talk to the real Postgres, Redis and Temporal that scripts/test.sh provisions.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/directory-setup.ts', 'test/helpers/dashboard-build.ts'],
    // Each test file gets its own database cloned from the migrated template (see own-database.ts).
    setupFiles: ['test/helpers/own-database.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
