// The usage pipeline: metered calls' usage events handed to BullMQ by the edge's UsageRecorder (batches
// of USAGE_BATCH_SIZE or every USAGE_FLUSH_MS) and aggregated into Postgres by the real queue-worker
// process (`workers/queues/main.ts`, a child process). Baseline in the same run: BullMQ's own add/process
// throughput on the same Redis (no-op jobs). Then: events at the proxy's measured peak rate (does
// aggregation keep up, and with what lag), and a flood (the aggregation's capacity).
// `npm run bench -- usage`
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { Queue, Worker } from 'bullmq';
import pino from 'pino';
import { edgeSettings } from '#edge/config';
import { UsageRecorder } from '#core/billing';
import { createAccount } from '#db/accounts';
import { createRedis } from '#core/platform';
import { createSql } from '#db/sql';
import type { UsageEvent } from '#db/usage';
import { createTestApi } from '#fixtures/temporal';
import { uniqueId } from '#fixtures/ids';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { loadAverage, startChild } from './lib/procs.js';
import { BENCHMARKS_MD, environmentLine, fmt, fmtSummary, log, percentile, summarize, writeSection } from './lib/report.js';

const scenario = 'usage';
const seconds = settings.BENCH_DURATION_SECONDS;
const FLOOD = Number(process.env.BENCH_USAGE_FLOOD ?? 50_000);
const BASELINE_JOBS = Number(process.env.BENCH_USAGE_BASELINE_JOBS ?? 5_000);
const POLL_MS = 20;
const startLoad = loadAverage();

/** The proxy's measured median peak (the proxy scenario's table), unless BENCH_USAGE_RATE says otherwise. */
function proxyPeak(): { rate: number; source: string } {
  if (process.env.BENCH_USAGE_RATE) return { rate: Number(process.env.BENCH_USAGE_RATE), source: 'BENCH_USAGE_RATE' };
  const doc = existsSync(BENCHMARKS_MD) ? readFileSync(BENCHMARKS_MD, 'utf8') : '';
  const match = /\| platform metered proxy[^|]*\| ([\d.]+) /.exec(doc);
  return match?.[1]
    ? { rate: Math.round(Number(match[1])), source: "the proxy section's median peak" }
    : { rate: 2_000, source: 'a default (no proxy result yet)' };
}

await prepareDatabase();
const prefix = uniqueId('bench-usage');
const sql = createSql(settings.DATABASE_URL, { max: 4, appName: 'bench-usage' });
const edge = edgeSettings.parse({ ...process.env, DATABASE_URL: settings.DATABASE_URL, REDIS_PREFIX: prefix });
const apiId = await createTestApi(sql, 'usage');
const redis = createRedis(settings.REDIS_URL, 'request-path', { enableOfflineQueue: false });
const queueRedis = createRedis(settings.REDIS_URL, 'queue');
const silent = pino({ level: 'silent' });

// --- baseline: BullMQ alone, no-op jobs ------------------------------------------------------------
async function bullmqBaseline(): Promise<{ addPerSec: number; processPerSec: number }> {
  const name = `noop-${randomUUID()}`;
  const queue = new Queue(name, { connection: queueRedis, prefix });
  let done = 0;
  let finished!: () => void;
  const all = new Promise<void>((resolve) => (finished = resolve));
  const t0 = performance.now();
  // Same concurrency as the usage queue's worker; the jobs do nothing.
  const workerConnection = createRedis(settings.REDIS_URL, 'queue');
  const worker = new Worker(
    name,
    async () => {
      if (++done === BASELINE_JOBS) finished();
    },
    { connection: workerConnection, prefix, concurrency: 4 },
  );
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < BASELINE_JOBS) {
        next += 1;
        await queue.add('noop', { n: next }, { removeOnComplete: true });
      }
    }),
  );
  const added = performance.now();
  await all;
  const processed = performance.now();
  await worker.close();
  await workerConnection.quit().catch(() => {});
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  return { addPerSec: BASELINE_JOBS / ((added - t0) / 1000), processPerSec: BASELINE_JOBS / ((processed - t0) / 1000) };
}

// --- the platform pipeline -----------------------------------------------------------------------
const workers = startChild('queue-workers', 'workers/queues/main.ts', [], {
  env: { DATABASE_URL: settings.DATABASE_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'warn' },
});

async function newAccount(): Promise<string> {
  const account = await createAccount(sql, { email: `bench-usage-${randomUUID()}@example.test`, ownerPersonId: null });
  if (!account) throw new Error('could not create the bench account');
  return account.id;
}
const counted = async (accountId: string) =>
  Number((await sql<{ n: string }[]>`select coalesce(sum(calls), 0)::text as n from usage_daily where account_id = ${accountId}`)[0]?.n ?? 0);
const event = (accountId: string): UsageEvent => ({
  id: randomUUID(),
  accountId,
  keyId: null,
  apiId,
  item: 'proxy',
  status: 200,
  latencyMs: 3,
  bytesIn: 0,
  bytesOut: 473,
  costMicros: '1',
  chargeId: null,
  at: new Date().toISOString(),
});
const recorder = () =>
  new UsageRecorder({
    sql,
    redis,
    prefix,
    batchSize: edge.USAGE_BATCH_SIZE,
    flushMs: edge.USAGE_FLUSH_MS,
    bufferMax: edge.USAGE_BUFFER_MAX,
    addTimeoutMs: edge.USAGE_QUEUE_TIMEOUT_MS,
    log: silent,
  });

/** Polls the aggregate until it reaches `target`, noting when each count was first seen. */
async function watch(accountId: string, target: number, onCount: (count: number, at: number) => void, timeoutMs = 120_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const n = await counted(accountId);
    onCount(n, performance.now());
    if (n >= target) return;
    if (performance.now() > deadline) throw new Error(`aggregation stalled at ${n} of ${target}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Events at a fixed rate; the lag of event i is when the aggregate first counts i + 1 events, minus when i was recorded. */
async function atRate(rate: number): Promise<{ lagP50: number; lagP99: number; lagMax: number; drainMs: number; produced: number }> {
  const accountId = await newAccount();
  const rec = recorder();
  const total = Math.round(rate * seconds);
  const producedAt: number[] = [];
  const lags: number[] = [];
  let seen = 0;
  const watcher = watch(accountId, total, (count, at) => {
    while (seen < count && seen < producedAt.length) lags.push(at - producedAt[seen++]!);
  });
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (producedAt.length < total && start + (producedAt.length * 1000) / rate <= now) {
        producedAt.push(performance.now());
        rec.record(event(accountId));
      }
      if (producedAt.length < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  const endProduce = performance.now();
  await rec.flush();
  await watcher;
  const drainMs = performance.now() - endProduce;
  await rec.close();
  return { lagP50: percentile(lags, 50), lagP99: percentile(lags, 99), lagMax: Math.max(...lags), drainMs, produced: total };
}

/** As many events as the recorder takes at once; the aggregation's throughput until all are counted. */
async function flood(): Promise<{ eventsPerSec: number; jobsPerSec: number }> {
  const accountId = await newAccount();
  const rec = recorder();
  const t0 = performance.now();
  for (let i = 0; i < FLOOD; i += 1) rec.record(event(accountId));
  await rec.flush();
  await watch(accountId, FLOOD, () => {});
  const secs = (performance.now() - t0) / 1000;
  await rec.close();
  return { eventsPerSec: FLOOD / secs, jobsPerSec: FLOOD / edge.USAGE_BATCH_SIZE / secs };
}

const { rate, source } = proxyPeak();
log(scenario, `load average at start ${startLoad}; rate ${rate} events/s (${source})`);
try {
  // Ready: one event goes all the way through.
  const probe = await newAccount();
  const probeRecorder = recorder();
  probeRecorder.record(event(probe));
  await probeRecorder.close();
  await watch(probe, 1, () => {}, 90_000);

  const baseline: Array<{ addPerSec: number; processPerSec: number }> = [];
  const steady: Array<Awaited<ReturnType<typeof atRate>>> = [];
  const floods: Array<Awaited<ReturnType<typeof flood>>> = [];
  for (let run = 1; run <= settings.BENCH_REPEATS; run += 1) {
    const b = await bullmqBaseline();
    baseline.push(b);
    const s = await atRate(rate);
    steady.push(s);
    const f = await flood();
    floods.push(f);
    log(
      scenario,
      `run ${run}: BullMQ no-op add ${fmt(b.addPerSec, 0)}/s, process ${fmt(b.processPerSec, 0)} jobs/s; at ${rate}/s lag p50 ${fmt(s.lagP50, 0)} ms, p99 ${fmt(s.lagP99, 0)} ms, drained ${fmt(s.drainMs, 0)} ms after the last event; flood ${fmt(f.eventsPerSec, 0)} events/s`,
    );
  }
  const sm = <T>(rows: T[], k: keyof T) => summarize(rows.map((r) => r[k] as number));
  const lagP99 = sm(steady, 'lagP99');
  const capacity = sm(floods, 'eventsPerSec');
  const verdict = (ok: boolean) => (ok ? '**met**' : '**missed**');
  writeSection(
    scenario,
    `## The usage pipeline

${environmentLine()}

Load average at the start: ${startLoad}.
Command: \`npm run bench -- usage\` (\`BENCH_DURATION_SECONDS=${seconds}\`, \`BENCH_REPEATS=${settings.BENCH_REPEATS}\`); median (min–max) over the runs.

Events are recorded with the edge's own \`UsageRecorder\` (batches of ${edge.USAGE_BATCH_SIZE} or every ${edge.USAGE_FLUSH_MS} ms, one BullMQ job per batch)
and aggregated by the real queue-worker process (\`workers/queues/main.ts\` as a child process: the usage queue at concurrency 4, one
transaction per batch that inserts the events and advances \`usage_daily\`). The lag of event *i* is the time from its \`record()\`
until the account's \`usage_daily\` count first reaches *i + 1* (polled every ${POLL_MS} ms, so lags are rounded up to the poll).
Baseline, on the same Redis: BullMQ alone, ${BASELINE_JOBS} no-op jobs added by 16 concurrent \`queue.add\` callers and processed by a
Worker at concurrency 4 in the bench process.

| measurement | median (min–max) |
|---|---|
| BullMQ baseline: jobs added / s | ${fmtSummary(sm(baseline, 'addPerSec'), 0)} |
| BullMQ baseline: no-op jobs processed / s (add to done) | ${fmtSummary(sm(baseline, 'processPerSec'), 0)} |
| platform at ${rate} events/s (${source}), ${seconds} s: lag p50 (ms) | ${fmtSummary(sm(steady, 'lagP50'), 0)} |
| … lag p99 (ms) | ${fmtSummary(lagP99, 0)} |
| … lag max (ms) | ${fmtSummary(sm(steady, 'lagMax'), 0)} |
| … time to count everything after the last event (ms) | ${fmtSummary(sm(steady, 'drainMs'), 0)} |
| platform flood of ${FLOOD} events: events aggregated / s | ${fmtSummary(capacity, 0)} |
| … jobs (batches of ${edge.USAGE_BATCH_SIZE}) / s | ${fmtSummary(sm(floods, 'jobsPerSec'), 1)} |

| ratio | measured | target |
|---|---|---|
| aggregation capacity / the proxy's peak rate | ${fmt(capacity.median / rate)} | ≥ 1 (keeps up): ${verdict(capacity.median >= rate)} |
| lag p99 at the proxy's peak rate | ${fmt(lagP99.median / 1000)} s | < 2 s: ${verdict(lagP99.median < 2_000)} |`,
  );
} finally {
  await workers.stop();
  await redis.quit().catch(() => {});
  await queueRedis.quit().catch(() => {});
  await sql.end({ timeout: 5 });
}
