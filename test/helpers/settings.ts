import { edgeSettings, type EdgeSettings } from '#edge/config';

export const testDatabaseUrl = () => process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/platform_test';

export { uniqueId } from '#fixtures/ids';

const GENEROUS_RATE_LIMITS = {
  RATE_LIMIT_KEY_MAX: '1000000',
  RATE_LIMIT_ACCOUNT_MAX: '1000000',
  RATE_LIMIT_PUBLIC_MAX: '1000000',
  RATE_LIMIT_LOGIN_MAX: '1000000',
  RATE_LIMIT_REGISTER_MAX: '1000000',
  // Tests fail sign-ins from 127.0.0.1 on purpose; only the throttle's own tests lower this.
  LOGIN_FREE_FAILURES_PER_CLIENT: '1000000',
  INVITES_PER_ACCOUNT_PER_DAY: '1000000',
};

/** Edge settings for a test app: the test database, real Redis and Temporal, overrides on top. */
export function testEdgeSettings(overrides: Record<string, string> = {}): EdgeSettings {
  return edgeSettings.parse({
    // Every test runs from 127.0.0.1 against one shared Redis: keep the per-address limits out of
    // the way of other tests. Tests of the limits themselves pass low limits as overrides.
    ...GENEROUS_RATE_LIMITS,
    // Fixtures register and top up at once, as a verified account would; the verification rule has
    // its own tests (test/edge/account-lifecycle.test.ts), which turn it on.
    EMAIL_VERIFICATION: 'off',
    ...process.env,
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    DATABASE_URL: testDatabaseUrl(),
    DATABASE_POOL_MAX: '10',
    // Ranking on the event loop: each test app would otherwise start two worker threads with their own
    // copy of the index. The worker path is tested on its own (test/edge/directory-index.test.ts).
    DIRECTORY_RANK_WORKERS: '0',
    // In process unless a test starts a ranking process (test/edge/directory-ranker.test.ts).
    DIRECTORY_RANK_URL: '',
    // Discovery's order is the catalog's alone: other tests' calls in the shared database would move it
    // (the feedback signal has its own test, test/edge/discovery-feedback.test.ts, which reads it).
    DISCOVERY_FEEDBACK_REFRESH_SECONDS: '0',
    ...overrides,
  });
}
