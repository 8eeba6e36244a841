// The platform's worker processes, started as a benchmark's children beside the edge, the way
// `npm run up` starts them (scripts/up.sh): the BullMQ queue workers (`workers/queues/main.ts`: usage
// aggregation, refunds and their reconciler, credit-hold recovery, retention, webhooks, ...), the
// Temporal worker (`workers/temporal/main.ts`) and the directory ranking process
// (`workers/directory/main.ts`). They are not pinned: like Postgres and Redis they float
// over every CPU. Each writes its log to a file of its own.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { usageBatchJob } from '#core/billing';
import { createRedis, TemporalGateway } from '#core/platform';
import { removeOperatorApi } from '#db/metered-apis';
import { createSql } from '#db/sql';
import { DEFAULT_EDGE_NODE_OPTIONS } from '#edge/config';
import { buildEdge } from '#scripts/build-edge';
import { freePort, ROOT, startChild, type Child } from './procs.js';

/**
 * The node flags every benchmark and the soak start an edge with: EDGE_NODE_OPTIONS, as `npm run up`
 * and docker-compose.yml pass it (unset: DEFAULT_EDGE_NODE_OPTIONS, as they start it; empty: Node's defaults).
 */
export const edgeNodeFlags: string[] = (process.env.EDGE_NODE_OPTIONS ?? DEFAULT_EDGE_NODE_OPTIONS).split(' ').filter(Boolean);

/** BENCH_EDGE=source: the benchmarks and the soak run the edge's TypeScript through tsx, not its bundle. */
export const edgeFromSource = process.env.BENCH_EDGE === 'source';

let edgeBuild: Promise<string> | undefined;
/**
 * The edge's entry as production starts it: the bundle `npm run build:edge` writes (built once per
 * run, into a folder of the run's own, so a run never starts another run's or a stale build). With
 * BENCH_EDGE=source, the TypeScript source through tsx instead, to measure what the build changes.
 */
export function edgeEntry(): Promise<string> {
  if (edgeFromSource) return Promise.resolve('apps/edge/src/server.ts');
  edgeBuild ??= (async () => {
    mkdirSync(join(ROOT, 'dist'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, 'dist/bench-edge-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    return (await buildEdge(dir)).entry;
  })();
  return edgeBuild;
}

/** How the benchmarks started the edge, for the reports. */
export const edgeEntryNote = () =>
  edgeFromSource
    ? 'the TypeScript source through tsx (`BENCH_EDGE=source`)'
    : 'the bundle `npm run build:edge` writes, with node, as `npm run up` and the Dockerfile start it';

export interface StackEnv extends NodeJS.ProcessEnv {
  DATABASE_URL: string;
  REDIS_PREFIX: string;
  REDIS_URL: string;
  TEMPORAL_ADDRESS: string;
  TEMPORAL_NAMESPACE: string;
  TEMPORAL_TASK_QUEUE: string;
}

export interface Workers {
  queue: Child;
  temporal: Child;
  /** The directory ranking process (workers/directory/main.ts) the edges ask for search and discovery. */
  ranker: Child;
  /** Where it listens (also set as `env.DIRECTORY_RANK_URL`). */
  rankUrl: string;
  /** Milliseconds until all three were ready. */
  readyMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function tail(path: string, lines = 20): string {
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Polls `ready` until it answers true; fails when `child` exits first or after `timeoutMs`. */
async function waitUntil(what: string, child: Child, logFile: string, timeoutMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.process.exitCode !== null || child.process.signalCode !== null)
      throw new Error(`${child.name} exited before ${what}; its log:\n${tail(logFile)}`);
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not within ${timeoutMs} ms; ${child.name}'s log:\n${tail(logFile)}`);
    await sleep(200);
  }
}

/**
 * Starts the queue workers, the Temporal worker and the directory ranking process with `env` (the
 * edge's own: same database, Redis prefix, Temporal task queue and log level) and waits until they
 * are ready: a BullMQ worker is registered on the usage queue under the prefix, the task queue has a
 * workflow poller, and the ranking process answers its /health. Sets `env.DIRECTORY_RANK_URL` to the
 * ranking process, so that edges started with `env` ask it, as `npm run up` runs them.
 * `onStart` sees each child as soon as it is spawned (to stop it on failure).
 */
export async function startWorkers(env: StackEnv, logDir: string, onStart: (child: Child) => void, timeoutMs = 120_000): Promise<Workers> {
  const t0 = Date.now();
  const queueLog = join(logDir, 'queue-workers.log');
  const temporalLog = join(logDir, 'temporal-worker.log');
  const queue = startChild('queue-workers', 'workers/queues/main.ts', [], { env, stdout: queueLog });
  onStart(queue);
  const temporal = startChild('temporal-worker', 'workers/temporal/main.ts', [], { env, stdout: temporalLog });
  onStart(temporal);
  const { child: ranker, url: rankUrl } = await startRanker(env, logDir, onStart, timeoutMs);
  env.DIRECTORY_RANK_URL = rankUrl;

  const redis = createRedis(env.REDIS_URL, 'queue', { connectionName: 'bench-readiness' });
  const usageQueue = new Queue(usageBatchJob.queue, { connection: redis, prefix: env.REDIS_PREFIX });
  const gateway = new TemporalGateway(env.TEMPORAL_ADDRESS, env.TEMPORAL_NAMESPACE, env.TEMPORAL_TASK_QUEUE);
  try {
    await Promise.all([
      waitUntil('a usage-queue worker was registered', queue, queueLog, timeoutMs, async () => (await usageQueue.getWorkersCount()) > 0),
      waitUntil(`task queue ${env.TEMPORAL_TASK_QUEUE} had a workflow poller`, temporal, temporalLog, timeoutMs, async () => {
        const answer = await gateway.connection.workflowService.describeTaskQueue({
          namespace: env.TEMPORAL_NAMESPACE,
          taskQueue: { name: env.TEMPORAL_TASK_QUEUE },
          taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
        });
        return (answer.pollers?.length ?? 0) > 0;
      }),
    ]);
  } finally {
    await usageQueue.close().catch(() => {});
    redis.disconnect();
    await gateway.close();
  }
  return { queue, temporal, ranker, rankUrl, readyMs: Date.now() - t0 };
}

/**
 * Starts the directory ranking process (workers/directory/main.ts) on a free loopback port with `env`
 * and waits until it answers its /health (it loads its index meanwhile; the first question waits for that).
 */
export async function startRanker(
  env: NodeJS.ProcessEnv,
  logDir: string,
  onStart: (child: Child) => void,
  timeoutMs = 120_000,
): Promise<{ child: Child; url: string }> {
  const port = await freePort();
  const logFile = join(logDir, 'directory-ranker.log');
  const child = startChild('directory-ranker', 'workers/directory/main.ts', [], {
    env: { ...env, DIRECTORY_RANK_HOST: '127.0.0.1', DIRECTORY_RANK_PORT: String(port) },
    stdout: logFile,
  });
  onStart(child);
  const url = `http://127.0.0.1:${port}`;
  await waitUntil('the directory ranking process answered', child, logFile, timeoutMs, async () => (await fetch(`${url}/health`)).ok);
  return { child, url };
}

/**
 * Deletes every Redis key under `prefix` (the run's queues, job schedulers, rate-limit counters) once
 * the processes using it have stopped; returns how many. Each run has a prefix of its own.
 */
export async function dropRedisPrefix(url: string, prefix: string): Promise<number> {
  const redis = createRedis(url, 'queue', { connectionName: 'bench-cleanup' });
  let dropped = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) dropped += await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return dropped;
}

/**
 * Removes the operator APIs a benchmark or the soak registered (ids `${prefix}${pid}`): this run's own
 * (`own`), and those of earlier runs of the same scenario whose process is gone from this machine (a run
 * stopped before its end), so that no bench upstream stays in the bench database's directory. The bench
 * database is this machine's own (scripts/bench.sh): a run on another machine sharing it would look gone.
 * Returns the ids removed.
 */
export async function removeRunApis(databaseUrl: string, prefix: string, own: string): Promise<string[]> {
  const sql = createSql(databaseUrl, { max: 1, appName: 'bench-cleanup' });
  try {
    const rows = await sql<{ id: string }[]>`
      select id from apis where source = 'operator' and starts_with(id, ${prefix})`;
    const gone = rows
      .map((r) => r.id)
      .filter((id) => {
        if (id === own) return true;
        const rest = id.slice(prefix.length);
        return /^[1-9]\d*$/.test(rest) && !processAlive(Number(rest));
      });
    for (const id of gone) await removeOperatorApi(sql, id);
    return gone;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
