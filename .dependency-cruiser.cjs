/**
 * The layout's import rules (`npm run lint:deps`, part of `npm test`). Imports flow one way:
 *   apps, workers -> packages/core -> db -> packages/contracts
 * workflows/ is deterministic Temporal code and imports only its own messages and the SDK.
 * See docs/ARCHITECTURE.md.
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'Modules must not import each other in a circle.', from: {}, to: { circular: true } },
    {
      name: 'no-app-to-app',
      severity: 'error',
      comment: 'An app never imports another app (share through packages/core or packages/contracts).',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/([^/]+)/', pathNot: '^apps/$1/' },
    },
    {
      name: 'core-not-to-apps',
      severity: 'error',
      comment: 'The domain (packages/core) belongs to no app or worker.',
      from: { path: '^packages/core/' },
      to: { path: '^(apps|workers|test|bench|scripts)/' },
    },
    {
      name: 'core-context-through-index',
      severity: 'error',
      comment: 'A bounded context is entered through its index.ts (#core/<context>), never a file deep inside it.',
      from: { path: '^(?!packages/core/)' },
      to: { path: '^packages/core/[^/]+/(?!index\\.ts$)' },
    },
    {
      name: 'core-without-fastify',
      severity: 'error',
      comment: 'The domain knows no web framework: it takes a Logger (#core/platform) and plain values, never Fastify types.',
      from: { path: '^packages/core/' },
      to: { path: '(^|/)node_modules/(fastify|@fastify/|fastify-)' },
    },
    {
      name: 'routes-call-core-only',
      severity: 'error',
      comment:
        'A route calls core (packages/core), which holds the rules; only core reaches db/ for the SQL. See docs/decisions/mcp-tools-run-route-operations.md.',
      from: { path: '^apps/edge/src/routes/' },
      to: { path: '^db/' },
    },
    {
      name: 'db-not-to-core',
      severity: 'error',
      comment: 'db/ is data access only: it never imports the domain or the apps.',
      from: { path: '^db/' },
      to: { path: '^(packages/core|apps|workers)/' },
    },
    {
      name: 'db-types-only-from-workflows',
      severity: 'error',
      comment: 'db/ may name workflow message types, never import workflow code.',
      from: { path: '^db/' },
      to: { path: '^workflows/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'contracts-are-leaves',
      severity: 'error',
      comment: 'packages/contracts holds value types only and imports nothing of ours.',
      from: { path: '^packages/contracts/' },
      to: { path: '^(apps|workers|workflows|db|packages/core)/' },
    },
    {
      name: 'workflows-deterministic',
      severity: 'error',
      comment: 'Workflow code imports only its own folder (and the Temporal SDK).',
      from: { path: '^workflows/' },
      to: { path: '^(apps|workers|db|packages)/' },
    },
    { name: 'workers-not-to-apps', severity: 'error', from: { path: '^workers/' }, to: { path: '^(apps|test|bench)/' } },
    {
      name: 'dashboard-only-contracts',
      severity: 'error',
      comment: 'The browser bundle may share contracts only.',
      from: { path: '^apps/dashboard/' },
      to: { path: '^(packages/core|db|workers|workflows)/' },
    },
    {
      name: 'fixtures-only-for-tests',
      severity: 'error',
      comment:
        'packages/fixtures (accounts, APIs, in-process workers, the loopback OAuth provider) is for tests, benchmarks and development scripts only.',
      from: { path: '^(apps|workers|workflows|db|packages/(core|contracts))/' },
      to: { path: '^packages/fixtures/' },
    },
    {
      name: 'bench-not-to-test',
      severity: 'error',
      comment: 'Benchmarks bring their own helpers (bench/lib).',
      from: { path: '^bench/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|\\.venv|\\.data)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.d.ts'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
