// Cookbook-session event streams: STREAMS (default 1,000) concurrent SSE clients on one edge
// instance, sharing one Redis subscriber. Measures opening + replay, fan-out of a live event to every
// client, memory per stream, and that closed clients free their subscriptions. `npm run bench -- sse`
// Temporal is not needed: the scenario writes the session's mirror row and appends events itself,
// exactly as the workflow's activity does.
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { buildApp } from '#edge/app';
import { edgeSettings } from '#edge/config';
import { createAccount } from '#db/accounts';
import { insertStartedSession } from '#db/cookbook-sessions';
import { appendSessionEvents } from '#core/cookbooks';
import { loadCookbooks } from '#db/cookbooks';
import { createKey } from '#db/keys';
import { createRedis } from '#core/platform';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { environmentLine, fmtSummary, log, summarize, writeSection } from './lib/report.js';

const STREAMS = Number(process.env.BENCH_SSE_STREAMS ?? 1000);
const scenario = 'sse';

await prepareDatabase();
const prefix = `bench-sse-${process.pid}`;
// All clients share one key here; in production they would hold many keys, so the per-key rate
// limit is lifted out of the way of what is measured.
const app = await buildApp(
  edgeSettings.parse({
    ...process.env,
    DATABASE_URL: settings.DATABASE_URL,
    LOG_LEVEL: 'warn',
    REDIS_PREFIX: prefix,
    SSE_HEARTBEAT_MS: '5000',
    RATE_LIMIT_KEY_MAX: '1000000',
    RATE_LIMIT_ACCOUNT_MAX: '1000000',
    SSE_MAX_STREAMS_PER_ACCOUNT: '10000',
  }),
);
const { sql, redis } = app.deps;
await loadCookbooks(sql);
const account = await createAccount(sql, { email: `bench-sse-${Date.now()}@example.test`, ownerPersonId: null });
if (!account) throw new Error('could not create the bench account');
const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: 'bench sse' });
await app.listen({ host: '127.0.0.1', port: 0 });
const port = (app.server.address() as AddressInfo).port;

const hubConnections = async () =>
  ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes(`name=${prefix}:sse-hub`)).length;
const waitUntil = async (what: string, check: () => boolean, timeoutMs = 60_000) => {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

/** Baseline: a bare Redis PUBLISH reaching one subscriber (the floor under any fan-out). */
async function publishRoundTrip(): Promise<number> {
  const subscriber = createRedis(settings.REDIS_URL, 'subscriber');
  const channel = `${prefix}:baseline`;
  await subscriber.subscribe(channel);
  const samples: number[] = [];
  for (let i = 0; i < 50; i += 1) {
    const got = new Promise<void>((resolve) => subscriber.once('message', () => resolve()));
    const start = performance.now();
    await redis.publish(channel, 'x');
    await got;
    samples.push(performance.now() - start);
  }
  await subscriber.quit();
  return summarize(samples).median;
}

interface Run {
  openMs: number;
  fanOutMs: number;
  kbPerStream: number;
  connections: number;
  freed: boolean;
}

async function run(index: number): Promise<Run> {
  const sessionId = `ses_bench${process.pid}r${index}`;
  await insertStartedSession(sql, {
    sessionId,
    accountId: account!.id,
    cookbookId: 'weather-alert-sms',
    workflowId: `cookbook-session-${sessionId}`,
    totalSteps: 4,
    firstStepId: 'fetch-forecast',
    selectedApis: {},
    idempotencyKey: null,
    startedAt: new Date(),
  });
  await appendSessionEvents(redis, prefix, sessionId, [{ seq: 1, name: 'session.started', data: { sessionId } }]);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let received = 0;
  let ended = 0;
  const closers: (() => void)[] = [];
  const openStart = performance.now();
  await Promise.all(
    Array.from(
      { length: STREAMS },
      () =>
        new Promise<void>((resolve, reject) => {
          const req = request(
            { host: '127.0.0.1', port, path: `/api/v1/cookbooks/sessions/${sessionId}/events`, headers: { authorization: `Bearer ${fullKey}` } },
            (res) => {
              if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (received += (chunk.match(/^event: /gm) ?? []).length));
              res.on('end', () => (ended += 1));
              resolve();
            },
          );
          req.on('error', reject);
          req.end();
          closers.push(() => req.destroy());
        }),
    ),
  );
  await waitUntil('replay', () => received >= STREAMS);
  const openMs = performance.now() - openStart;
  const kbPerStream = (process.memoryUsage().rss - rssBefore) / 1024 / STREAMS;
  const connections = await hubConnections();

  const fanOutStart = performance.now();
  await appendSessionEvents(redis, prefix, sessionId, [{ seq: 2, name: 'step.started', data: { sessionId } }]);
  await waitUntil('live event on every stream', () => received >= 2 * STREAMS);
  const fanOutMs = performance.now() - fanOutStart;

  for (const close of closers.slice(0, STREAMS / 2)) close();
  await waitUntil('closed clients dropped', () => app.sessionEvents.stats().followers === STREAMS - STREAMS / 2);
  await appendSessionEvents(redis, prefix, sessionId, [{ seq: 3, name: 'session.cancelled', data: { sessionId } }]);
  await waitUntil('final event ends the rest', () => ended >= STREAMS / 2);
  const freed = app.sessionEvents.stats().followers === 0;
  return { openMs, fanOutMs, kbPerStream, connections, freed };
}

const baseline = await publishRoundTrip();
const runs: Run[] = [];
for (let i = 1; i <= settings.BENCH_REPEATS; i += 1) {
  runs.push(await run(i));
  const r = runs.at(-1)!;
  log(
    scenario,
    `run ${i}: ${STREAMS} streams open+replayed in ${r.openMs.toFixed(0)} ms, live event on all in ${r.fanOutMs.toFixed(1)} ms, ${r.kbPerStream.toFixed(1)} KiB/stream, ${r.connections} subscriber connection(s), freed: ${r.freed}`,
  );
}
const open = summarize(runs.map((r) => r.openMs));
const fanOut = summarize(runs.map((r) => r.fanOutMs));
const memory = summarize(runs.map((r) => r.kbPerStream));
const maxConnections = Math.max(...runs.map((r) => r.connections));
writeSection(
  scenario,
  `## Session event streams (SSE)

${environmentLine()}

Command: \`npm run bench -- sse\` (${STREAMS.toLocaleString('en')} concurrent clients on one edge instance, one session, ${settings.BENCH_REPEATS} runs; median (min–max)).

| measurement | baseline: bare Redis PUBLISH to one subscriber | platform | target | met |
|---|---|---|---|---|
| open ${STREAMS.toLocaleString('en')} streams and replay their history, ms | — | ${fmtSummary(open, 0)} | — | — |
| one live event reaching all ${STREAMS.toLocaleString('en')} streams (the slowest stream, so at least the p99 of delivery), ms | ${baseline.toFixed(2)} (one subscriber) | ${fmtSummary(fanOut, 1)} | delivery p99 under 100 ms | ${fanOut.max < 100 ? 'yes' : 'no'} |
| Redis subscriber connections for all streams | — | ${maxConnections} | 1 | ${maxConnections === 1 ? 'yes' : 'no'} |
| memory per open stream (RSS growth), KiB | — | ${fmtSummary(memory, 1)} | — | — |
| closed clients' subscriptions freed | — | ${runs.every((r) => r.freed) ? 'all' : 'not all'} | all | ${runs.every((r) => r.freed) ? 'yes' : 'no'} |

Each edge instance reads every session stream through one subscriber connection (notifications from
the activities) plus its shared command connection (\`XRANGE\`), so open streams cost memory, not
Redis connections.`,
);

await app.close();
await sql`delete from accounts where id = ${account.id}`.catch(() => {});
process.exit(0);
