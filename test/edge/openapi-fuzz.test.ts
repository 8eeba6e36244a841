import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

// Schemathesis (PyPI, in the project's .venv) reads the edge's own OpenAPI document and fuzzes every
// operation with an authenticated key: no 5xx, every response in its documented schema and status
// codes, the error shape, auth enforced, undeclared methods refused. Examples per operation:
// SCHEMATHESIS_MAX_EXAMPLES (default 8, to keep npm test short; raise it for a deeper run).

const schemathesis = join(process.cwd(), '.venv', 'bin', 'schemathesis');
const maxExamples = process.env.SCHEMATHESIS_MAX_EXAMPLES ?? '8';

describe('the edge fuzzed against its own OpenAPI document (Schemathesis)', () => {
  const taskQueue = uniqueId('fuzz-');
  const redisPrefix = uniqueId('fuzz');
  let app: FastifyInstance;
  let baseUrl: string;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let account: TestAccount;
  let reports: string;

  beforeAll(async () => {
    app = await createTestApp({
      TEMPORAL_TASK_QUEUE: taskQueue,
      REDIS_PREFIX: redisPrefix,
      SSE_MAX_LIFETIME_SECONDS: '2',
      SSE_MAX_STREAMS_PER_ACCOUNT: '1000',
    });
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    // The directory index and the model loaded before the fuzzing starts, not by its first discovery.
    await app.directoryIndex.get();
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(app.deps.sql, { balanceMicros: 50_000_000n });
    reports = mkdtempSync(join(tmpdir(), 'schemathesis-'));
  }, 120_000);
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
    if (reports) rmSync(reports, { recursive: true, force: true });
  });

  it('finds no server error, no response off its schema and no broken contract', async () => {
    const args = [
      'run',
      `${baseUrl}/api/v1/openapi.json`,
      // The same key under both names the document declares, so no generated value stands in for it.
      '--header',
      `Authorization: Bearer ${account.fullKey}`,
      '--header',
      `X-API-Key: ${account.fullKey}`,
      '--checks',
      'all',
      // Business rules JSON Schema cannot state (a cursor from an earlier page, an expiry in the
      // future, a cookbook's required slots, a top-up within the sandbox cap) answer 400 to
      // schema-valid input by design: docs/decisions/fuzzing.md.
      '--exclude-checks',
      'positive_data_acceptance',
      // The proxy forwards to third-party hosts: fuzzing it would send traffic to real APIs.
      // Its answers are the upstream's; test/edge/proxy*.test.ts cover it. The activity stream and a
      // pending connect request's events are event streams that stay open, and reading a pending
      // connect request long-polls for up to 60 s by design (`wait`): test/edge/activity.test.ts and
      // test/edge/connect-requests.test.ts cover them.
      '--exclude-path-regex',
      '^/api/v1/(proxy/|activity/stream$|connect/requests/[^/]+(/events)?$)',
      '--max-examples',
      maxExamples,
      // One worker: with two, Python 3.11's ast.parse races between the worker threads and
      // Schemathesis ends with "AST constructor recursion depth mismatch" (python/cpython#106905).
      '--workers',
      '1',
      '--seed',
      '20261124',
      // Above the longest long poll a route accepts (GET /connect/requests/{id}?wait=10).
      '--request-timeout',
      '15',
      // The response-time check's limit (10 s unless set): a discovery took 13.4 s on a slower two-core
      // host with the suite beside it (2026-11-29; its index loaded on first use then). Hangs are still
      // caught by the request timeout above.
      '--max-response-time',
      '15',
      '--max-failures',
      '100',
      '--output-truncate',
      'false',
      '--report-junit-path',
      join(reports, 'junit.xml'),
    ];
    const run = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(schemathesis, args, { env: { ...process.env, NO_COLOR: '1', SCHEMATHESIS_HOOKS: '' }, cwd: reports });
      let out = '';
      child.stdout.on('data', (chunk) => (out += chunk));
      child.stderr.on('data', (chunk) => (out += chunk));
      child.on('close', (code) => resolve({ code, out }));
    });
    const output = run.out.replaceAll(account.fullKey, 'service_sk_…');
    if (process.env.SCHEMATHESIS_OUTPUT) writeFileSync(process.env.SCHEMATHESIS_OUTPUT, output);
    expect(run.code, output).toBe(0);
    // It really ran: one test case per operation in its report.
    const junit = readFileSync(join(reports, 'junit.xml'), 'utf8');
    expect((junit.match(/<testcase /g) ?? []).length).toBeGreaterThan(40);
    // 120 s on a quick two-core host with the suite beside it, 217 s on a slower one (2026-11-29): room for both.
  }, 600_000);
});
