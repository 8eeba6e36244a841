// Cookbook step completion, end to end: POST /cookbooks/sessions/{sid}/complete-step on the edge (auth,
// session look-up, schema validation, the Temporal Update, the answer) beside a plain Temporal client
// sending the same Update (`completeStep`) to the same dev server, handled by the same worker.
// Latency: one caller, alternating the two paths. Throughput: CONCURRENCY callers per path.
// Every run uses fresh sessions (started over REST, not measured); each completes its first step.
// `npm run bench -- complete-step`
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { Pool } from 'undici';
import { buildApp } from '#edge/app';
import { edgeSettings } from '#edge/config';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis, temporalDataConverter } from '#core/platform';
import { completeStepUpdate, workflowIdFor } from '#workflows/messages';
import { createTestAccount } from '#fixtures/accounts';
import { createTestApi, startWorker, terminateRunningSessions } from '#fixtures/temporal';
import { uniqueId } from '#fixtures/ids';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { loadAverage } from './lib/procs.js';
import { profileMarkdown, profileWhile, type ProfileSummary } from './lib/cpu-profile.js';
import { environmentLine, fmt, fmtSummary, log, percentile, summarize, writeSection } from './lib/report.js';

const scenario = 'complete-step';
const LATENCY_OPS = Number(process.env.BENCH_COMPLETE_LATENCY_OPS ?? 50);
const THROUGHPUT_OPS = Number(process.env.BENCH_COMPLETE_THROUGHPUT_OPS ?? 100);
const CONCURRENCY = 16;
const FORECAST = { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning', severity: 'severe' }] };
const startLoad = loadAverage();

await prepareDatabase();
const taskQueue = uniqueId('bench-complete-');
const redisPrefix = uniqueId('bench-complete');
const app = await buildApp(
  edgeSettings.parse({
    ...process.env,
    DATABASE_URL: settings.DATABASE_URL,
    LOG_LEVEL: 'warn',
    REDIS_PREFIX: redisPrefix,
    TEMPORAL_TASK_QUEUE: taskQueue,
    RATE_LIMIT_KEY_MAX: '1000000000',
    RATE_LIMIT_ACCOUNT_MAX: '1000000000',
  }),
);
const { sql } = app.deps;
await loadCookbooks(sql);
const workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
// The cookbook tests' worker (same workflow bundle and activities), with a sticky cache as in production.
const worker = await startWorker({ taskQueue, sql, redis: workerRedis, redisPrefix, maxCachedWorkflows: 2_000 });
await app.listen({ host: '127.0.0.1', port: 0 });
const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const http = new Pool(origin, { connections: CONCURRENCY, keepAliveTimeout: 30_000 });
const plainConnection = await Connection.connect({ address: settings.TEMPORAL_ADDRESS });
// The same payload codec as the edge's client: the worker decrypts what it is sent.
const plain = new Client({ connection: plainConnection, namespace: 'default', dataConverter: temporalDataConverter(settings.TEMPORAL_CODEC_KEYS) });

const account = await createTestAccount(sql);
const headers = { authorization: `Bearer ${account.fullKey}`, 'content-type': 'application/json' };
const selectedApis = { weather: await createTestApi(sql, 'weather'), sms: await createTestApi(sql, 'sms') };

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await http.request({ method: 'POST', path, headers, body: JSON.stringify(body) });
  const json = (await res.body.json()) as Record<string, unknown>;
  return { status: res.statusCode, json };
}

async function startSessions(n: number): Promise<string[]> {
  const ids: string[] = [];
  const queue = Array.from({ length: n }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (queue.shift() !== undefined) {
        const res = await post('/api/v1/cookbooks/weather-alert-sms/start', { selectedApis });
        if (res.status !== 201) throw new Error(`start answered ${res.status}: ${JSON.stringify(res.json)}`);
        ids.push((res.json.session as { sessionId: string }).sessionId);
      }
    }),
  );
  return ids;
}

/** The platform path: one REST completion; returns its latency (ms). */
async function viaEdge(sessionId: string): Promise<number> {
  const t = performance.now();
  const res = await post(`/api/v1/cookbooks/sessions/${sessionId}/complete-step`, { stepId: 'fetch-forecast', resultData: FORECAST });
  const ms = performance.now() - t;
  if (res.status !== 200 || (res.json.session as { currentStep?: string })?.currentStep !== 'draft-message')
    throw new Error(`complete-step answered ${res.status}: ${JSON.stringify(res.json)}`);
  return ms;
}

/** The baseline: the same Update from a plain Temporal client. */
async function viaClient(sessionId: string): Promise<number> {
  const t = performance.now();
  const result = await plain.workflow
    .getHandle(workflowIdFor(sessionId))
    .executeUpdate(completeStepUpdate, { args: [{ stepId: 'fetch-forecast', resultData: FORECAST, actor: 'key' }] });
  const ms = performance.now() - t;
  if (result.nextStepId !== 'draft-message') throw new Error(`unexpected Update result: ${JSON.stringify(result)}`);
  return ms;
}

async function throughput(fn: (sid: string) => Promise<number>, ids: string[]): Promise<number> {
  const queue = [...ids];
  const t = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let sid = queue.shift(); sid !== undefined; sid = queue.shift()) await fn(sid);
    }),
  );
  return ids.length / ((performance.now() - t) / 1000);
}

interface Run {
  edgeP50: number;
  edgeP99: number;
  clientP50: number;
  clientP99: number;
  edgeRps: number;
  clientRps: number;
}
const runs: Run[] = [];
log(scenario, `load average at start ${startLoad}`);
try {
  // Warm-up: JIT, connections, workflow bundle.
  const warm = await startSessions(20);
  for (const [i, sid] of warm.entries()) await (i % 2 ? viaClient(sid) : viaEdge(sid));

  for (let run = 1; run <= settings.BENCH_REPEATS; run += 1) {
    const ids = await startSessions(2 * (LATENCY_OPS + THROUGHPUT_OPS));
    const edgeLat: number[] = [];
    const clientLat: number[] = [];
    for (let i = 0; i < LATENCY_OPS; i += 1) {
      edgeLat.push(await viaEdge(ids[2 * i]!));
      clientLat.push(await viaClient(ids[2 * i + 1]!));
    }
    const rest = ids.slice(2 * LATENCY_OPS);
    const edgeRps = await throughput(viaEdge, rest.slice(0, THROUGHPUT_OPS));
    const clientRps = await throughput(viaClient, rest.slice(THROUGHPUT_OPS));
    const r = {
      edgeP50: percentile(edgeLat, 50),
      edgeP99: percentile(edgeLat, 99),
      clientP50: percentile(clientLat, 50),
      clientP99: percentile(clientLat, 99),
      edgeRps,
      clientRps,
    };
    runs.push(r);
    log(
      scenario,
      `run ${run}: edge p50 ${fmt(r.edgeP50)} / p99 ${fmt(r.edgeP99)} ms, ${fmt(edgeRps, 0)}/s; plain client p50 ${fmt(r.clientP50)} / p99 ${fmt(r.clientP99)} ms, ${fmt(clientRps, 0)}/s`,
    );
  }

  // Where the time goes: this process (edge, worker and the plain client all live here) profiled over
  // the same number of sequential completions by each path. The worker's share (replaying and running
  // the workflow, activities) is in both and varies from run to run; the edge's own share is the self
  // time in its code and the libraries only it uses on this path.
  const profiled = await startSessions(2 * LATENCY_OPS);
  const sequential = async (fn: (sid: string) => Promise<number>, ids: string[]) => {
    const t = performance.now();
    for (const sid of ids) await fn(sid);
    return performance.now() - t;
  };
  const plainProfile = await profileWhile(() => sequential(viaClient, profiled.slice(0, LATENCY_OPS)));
  const edgeProfile = await profileWhile(() => sequential(viaEdge, profiled.slice(LATENCY_OPS)));
  const perOp = (p: { result: number; summary: ProfileSummary }) => ({ wall: p.result / LATENCY_OPS, cpu: p.summary.busyMs / LATENCY_OPS });
  const plainCost = perOp(plainProfile);
  const edgeCost = perOp(edgeProfile);
  const EDGE_AREAS =
    /^(apps\/edge\/|db\/src\/|fastify|@fastify\/|find-my-way|avvio|light-my-request|zod|fastify-type-provider-zod|ajv|postgres$|pino|@pinojs\/|jose)/;
  const edgeAreasMs = (p: { summary: ProfileSummary }) =>
    p.summary.allAreas.filter((a) => EDGE_AREAS.test(a.name)).reduce((ms, a) => ms + a.ms, 0) / LATENCY_OPS;
  // The worker's activities use db/src and postgres.js too, so both paths are shown.
  const edgeSelfMs = edgeAreasMs(edgeProfile);
  const plainSelfMs = edgeAreasMs(plainProfile);
  log(
    scenario,
    `profiled: plain ${fmt(plainCost.cpu)} ms CPU / ${fmt(plainCost.wall)} ms per completion; edge ${fmt(edgeCost.cpu)} ms CPU / ${fmt(edgeCost.wall)} ms, ${fmt(edgeSelfMs)} ms in the edge's code and libraries (plain path: ${fmt(plainSelfMs)} ms)`,
  );

  const sm = (k: keyof Run) => summarize(runs.map((r) => r[k]));
  const addedP50 = summarize(runs.map((r) => r.edgeP50 - r.clientP50));
  const addedP99 = summarize(runs.map((r) => r.edgeP99 - r.clientP99));
  const ratio = summarize(runs.map((r) => r.edgeRps / r.clientRps));
  const verdict = (ok: boolean) => (ok ? '**met**' : '**missed**');
  writeSection(
    scenario,
    `## Cookbook step completion (REST → Temporal Update → answer)

${environmentLine()}

Load average at the start: ${startLoad}.
Command: \`npm run bench -- complete-step\` (\`BENCH_REPEATS=${settings.BENCH_REPEATS}\`); median (min–max) over the runs.

Each completion finishes the first step (\`fetch-forecast\`, validated against its JSON schema) of a fresh \`weather-alert-sms\` session.
The platform path is \`POST /api/v1/cookbooks/sessions/{sid}/complete-step\` over keep-alive HTTP to an edge in this process (key auth,
session row look-up, validation, the \`completeStep\` Update with its validator, the answer with \`session\` and \`nextStep\`).
The baseline is a plain \`@temporalio/client\` \`executeUpdate(completeStep)\` on its own connection to the same dev server (127.0.0.1:7233).
Both are handled by the same worker (\`test/helpers/cookbooks.ts\` \`startWorker\`, the production workflow bundle and activities,
sticky cache of 2,000 workflows), all in one process. Latency: ${LATENCY_OPS} completions per path per run, one caller, the two paths
alternating. Throughput: ${THROUGHPUT_OPS} completions per path per run, ${CONCURRENCY} concurrent callers.

| path | p50 (ms) | p99 (ms) | completions/s at ${CONCURRENCY} callers |
|---|---|---|---|
| plain Temporal client (baseline) | ${fmtSummary(sm('clientP50'))} | ${fmtSummary(sm('clientP99'))} | ${fmtSummary(sm('clientRps'), 0)} |
| edge REST | ${fmtSummary(sm('edgeP50'))} | ${fmtSummary(sm('edgeP99'))} | ${fmtSummary(sm('edgeRps'), 0)} |

| ratio (per run) | measured | target |
|---|---|---|
| added p50 (ms) | ${fmtSummary(addedP50)} | ≤ +2: ${verdict(addedP50.median <= 2)} |
| added p99 (ms) | ${fmtSummary(addedP99)} | ≤ +5: ${verdict(addedP99.median <= 5)} |
| edge / plain client throughput | ${fmtSummary(ratio)} | ≥ 0.8: ${verdict(ratio.median >= 0.8)} |

### Where the time goes

This process (the edge, the worker with its workflow cache and the plain client) under the V8 profiler (\`node:inspector\`)
for ${LATENCY_OPS} sequential completions by each path:

| path | CPU of this process per completion (ms) | wall time per completion (ms) |
|---|---|---|
| plain Temporal client | ${fmt(plainCost.cpu)} | ${fmt(plainCost.wall)} |
| edge REST | ${fmt(edgeCost.cpu)} | ${fmt(edgeCost.wall)} |

Most of this process's CPU is the worker's (replaying and running the workflow, its activities), on both paths and varying
from run to run. The edge's own share on its path, self time in \`apps/edge\`, \`db/src\` and the libraries only it uses here
(Fastify and its plugins, zod, postgres.js for the session rows, pino, jose), is at most ${fmt(edgeSelfMs)} ms per completion
(${fmt(plainSelfMs)} ms in the same areas on the plain path, where only the worker's activities use \`db/src\` and postgres.js); Node's own
HTTP parsing and socket writes (shared with the gRPC client in "node internals") come on top. The rest of the wall time is the
Update's round trip through the dev server and the worker (idle time here), and on the edge path its one Postgres round trip, before
the Update: the session row with its cookbook's version (the cookbook itself is cached in process; the answer comes from the Update's
result). The edge path's profile:

${profileMarkdown(edgeProfile.summary)}`,
  );
} finally {
  await terminateRunningSessions(plain, taskQueue).catch(() => {});
  await http.close();
  await app.close();
  await worker.stop();
  await workerRedis.quit();
  await plainConnection.close();
}
