// The metered call's hot path, stage by stage (issue 34: "start from a budget, not a profile"). Each
// stage runs ALONE, in this process, with the edge's real code and, where the stage uses them, the real
// Postgres and Redis, warmed up to its steady state (a cached key, a local rate-limit quota, an open
// credit hold, ...), and is timed as CPU time (process.cpuUsage: every thread of this process, so
// Postgres-client parsing, libuv and GC count; Postgres and Redis themselves do not) over N iterations,
// median of several runs. Beside each stage, its budget: the CPU a call may cost for the metered proxy
// to keep 0.75 of the bare proxy's throughput (bare CPU per call ÷ 0.75), with the bare Fastify proxy
// (bench/children/bare-proxy.ts) measured in the same run the way the proxy scenario measures it (its
// process's CPU over a peak run ÷ the calls answered). The full edge is measured the same way, so what
// the stages do not explain (Fastify's hooks, the HTTP server, the rest) shows as a remainder.
// `npm run bench -- stages`
import { randomUUID } from 'node:crypto';
import { mkdtempSync, openSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { Agent, Pool, type Dispatcher } from 'undici';
import { runApiCli } from '#cli/api-cli';
import { createAccount } from '#db/accounts';
import { createKey } from '#db/keys';
import { credit } from '#db/ledger';
import { buildApp, edgeLogger, loggedUrl } from '#edge/app';
import { edgeSettings } from '#edge/config';
import { RateCounters, type LimiterRedis } from '#edge/http/rate-limit-quotas';
import { UpstreamCall } from '#edge/http/upstream-call';
import { chargeCall } from '#core/billing';
import { BlockLogWriter } from '#core/platform';
import { droppedRequestHeaders, downstreamResponseHeaders, planMeteredCall, SecretRedactor, upstreamRequestHeaders } from '#core/gateway';
import { callerFromKey } from '#core/identity';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { CPU_EDGE, CPU_LOAD, freePort, placement, procStat, runJson, startChild, waitForHttp, type Child } from './lib/procs.js';
import { environmentLine, fmt, fmtSummary, log, summarize, writeSection, type Summary } from './lib/report.js';
import { dropRedisPrefix, edgeNodeFlags, removeRunApis, startWorkers, type StackEnv } from './lib/stack.js';

const scenario = 'stages';
/** Iterations per timed run of a stage, and timed runs per stage (the median is reported). */
const N = Number(process.env.BENCH_STAGES_ITERATIONS ?? 20_000);
const RUNS = Number(process.env.BENCH_STAGES_RUNS ?? 5);
const seconds = settings.BENCH_DURATION_SECONDS;
const repeats = settings.BENCH_REPEATS;
/** The peak runs measuring the bare proxy's and the edge's CPU per call (as bench/proxy.ts does). */
const CONNECTIONS = Number(process.env.BENCH_PROXY_CONNECTIONS ?? 32);
/** Off (BENCH_STAGES_EDGE=0): skip the full edge's CPU per call (and so the remainder row). */
const MEASURE_EDGE = process.env.BENCH_STAGES_EDGE !== '0';
const TARGET_RATIO = 0.75;
const RUN_ID = `bench-stages-${process.pid}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

await prepareDatabase();
const tmp = mkdtempSync(join(os.tmpdir(), 'bench-stages-'));
const children: Child[] = [];
const stopAll = async () => {
  for (const child of children.toReversed()) await child.stop().catch(() => {});
};
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));

/** CPU (µs, user + system, every thread) of a child process so far, from /proc/<pid>/stat. */
const childCpuMicros = (child: Child) => procStat(child.process.pid!).cpuMicros;

/**
 * Times `one` (awaited when it answers a promise) over N iterations, RUNS times after a warm-up of
 * N/5: CPU µs per iteration of this whole process. `lanes` loops run side by side (the stages that
 * wait on another process run with as many calls in flight as a loaded edge has: one at a time, each
 * would pay a wake-up of the event loop alone). `tailMs`: how long to wait after each run before
 * reading the clock, so the work a stage defers (a settlement, a usage flush) is counted with it.
 */
async function timeStage(
  one: (i: number, lane: number) => unknown,
  options: { tailMs?: number; lanes?: number } = {},
): Promise<{ cpu: Summary; wall: Summary }> {
  const { tailMs = 0, lanes = 1 } = options;
  let i = 0;
  const loop = async (n: number) => {
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        while (i < n) {
          i += 1;
          const out = one(i, lane);
          if (out instanceof Promise) await out;
        }
      }),
    );
    i = 0;
  };
  await loop(Math.ceil(N / 5));
  if (tailMs) await sleep(tailMs);
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let r = 0; r < RUNS; r += 1) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await loop(N);
    const t1 = performance.now();
    if (tailMs) await sleep(tailMs);
    const used = process.cpuUsage(c0);
    cpu.push((used.user + used.system) / N);
    wall.push(((t1 - t0) * 1000) / N);
  }
  return { cpu: summarize(cpu), wall: summarize(wall) };
}

try {
  // --- the upstream, a byte sink, the API, the account ----------------------------------------------
  const upstreamPort = await freePort();
  const upstreamOrigin = `http://127.0.0.1:${upstreamPort}`;
  const upstream = startChild('upstream', 'bench/children/upstream.ts', [String(upstreamPort)], { cpu: CPU_LOAD });
  children.push(upstream);
  await waitForHttp(`${upstreamOrigin}/`, 30_000, upstream);
  // Where answer piping writes: a process that reads and drops every byte (its CPU is not ours).
  const sinkPort = await freePort();
  const sink = startChild('sink', process.execPath, ['-e', `require('node:net').createServer((s) => s.resume()).listen(${sinkPort}, '127.0.0.1')`], {
    cpu: CPU_LOAD,
  });
  children.push(sink);

  const apiId = `bench-stages-${process.pid}`;
  await runApiCli(['add', '--id', apiId, '--name', 'Bench upstream', '--base-url', upstreamOrigin, '--price', '0.000001'], {
    ...process.env,
    DATABASE_URL: settings.DATABASE_URL,
  });

  // --- the edge's own objects, built as the edge builds them -----------------------------------------
  const edgeEnv = {
    NODE_ENV: 'development', // production settings refuse the loopback upstream
    ALLOW_PRIVATE_UPSTREAMS: 'true',
    LOG_LEVEL: 'info',
    DATABASE_URL: settings.DATABASE_URL,
    REDIS_URL: settings.REDIS_URL,
    REDIS_PREFIX: RUN_ID,
    TEMPORAL_ADDRESS: settings.TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: settings.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: RUN_ID,
    RATE_LIMIT_KEY_MAX: '1000000000',
    RATE_LIMIT_ACCOUNT_MAX: '1000000000',
  };
  const edge = edgeSettings.parse({ ...process.env, ...edgeEnv, DISCOVERY_MODEL_DIR: 'off', DIRECTORY_RANK_WORKERS: '0' });
  // The app's own log lines go nowhere; the log-line stage builds production's logger apart.
  const app = await buildApp(edge, { logger: { ...edgeLogger(edge), level: 'warn' } });
  await app.ready();
  const { sql } = app.deps;
  const account = await createAccount(sql, { email: `bench-stages-${process.pid}-${Date.now()}@example.test`, ownerPersonId: null });
  if (!account) throw new Error('could not create the bench account');
  await credit(sql, { accountId: account.id, amountMicros: 1_000_000_000_000n, kind: 'adjustment' });
  const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: 'bench stages' });
  const caller = callerFromKey(await app.keyVerifier.verify(fullKey));
  const api = await app.apiCache.get(apiId);
  if (!api) throw new Error(`API ${apiId} is not in the edge's cache`);

  // What autocannon sends (the proxy scenario's load) plus the headers a typical client adds.
  const rawHeaders = [
    'host',
    '127.0.0.1:3000',
    'x-api-key',
    fullKey,
    'user-agent',
    'bench-agent/1.0',
    'accept',
    'application/json',
    'connection',
    'keep-alive',
  ];
  const sample = await new Pool(upstreamOrigin).request({ method: 'GET', path: '/items?x=1' });
  const answerBody = Buffer.from(await sample.body.arrayBuffer());
  const answerHeaders = sample.headers;

  const stages: Array<{ name: string; what: string; cpu: Summary; wall: Summary; bare?: { cpu: Summary; what: string }; note?: string }> = [];
  const record = (name: string, what: string, t: { cpu: Summary; wall: Summary }, note?: string) => {
    stages.push({ name, what, ...t, ...(note ? { note } : {}) });
    log(scenario, `${name}: ${fmtSummary(t.cpu)} µs CPU, ${fmtSummary(t.wall)} µs wall per call${note ? ` (${note})` : ''}`);
  };
  const bareOf = (name: string, what: string, t: { cpu: Summary }) => {
    const stage = stages.find((s) => s.name === name)!;
    stage.bare = { cpu: t.cpu, what };
    log(scenario, `${name}, the bare proxy's equivalent: ${fmtSummary(t.cpu)} µs CPU`);
  };

  // 1. Key lookup: a verifier cache hit and the caller it makes (plugins/auth.ts).
  record(
    'key lookup',
    '`keyVerifier.verify(key)` (cached row) + `callerFromKey`',
    await timeStage(async () => callerFromKey(await app.keyVerifier.verify(fullKey))),
  );

  // 2. Limiter: the key's and the account's local quotas (plugins/rate-limit.ts counts both per call),
  //    answered from tokens this edge claimed ahead; a claim goes to Redis when they run low.
  const counters = new RateCounters(app.deps.redis as LimiterRedis);
  const quota = (max: number, windowSeconds: number) => ({
    max,
    windowMs: windowSeconds * 1000,
    blockMax: Math.max(1, Math.min(edge.RATE_LIMIT_LOCAL_BLOCK_MAX, Math.floor(max / 20))),
  });
  const keyQuota = quota(edge.RATE_LIMIT_KEY_MAX, edge.RATE_LIMIT_KEY_WINDOW_SECONDS);
  const accountQuota = quota(edge.RATE_LIMIT_ACCOUNT_MAX, edge.RATE_LIMIT_ACCOUNT_WINDOW_SECONDS);
  const keyCounter = `${RUN_ID}:ratelimit:key:key:${caller.keyId}`;
  const accountCounter = `${RUN_ID}:ratelimit:account:account:${caller.accountId}`;
  const limited = await timeStage(() => {
    const own = counters.local(keyCounter, keyQuota);
    const mine = counters.local(accountCounter, accountQuota);
    if (own instanceof Promise || mine instanceof Promise) return Promise.all([own, mine]);
    return undefined;
  });
  record(
    'limiter',
    'two `RateCounters.local` hits (key and account quotas)',
    limited,
    `${fmt((counters.stats.local / counters.stats.hits) * 100, 1)} % of hits answered locally`,
  );
  counters.close();

  // 3. Hold charge: `chargeCall` through the edge's CreditReservations (as http/charge.ts), from an
  //    open credit hold once the account is busy; settlements (every CREDIT_HOLD_SETTLE_MS) counted.
  let held = 0;
  let charged = 0;
  const charge = await timeStage(
    async () => {
      const receipt = await chargeCall(app.charges, caller, { costMicros: 1n, item: 'proxy', apiId }, undefined, app.usage);
      charged += 1;
      if (receipt.holdId !== null) held += 1;
    },
    { tailMs: edge.CREDIT_HOLD_SETTLE_MS + 50 },
  );
  record(
    'hold charge',
    '`chargeCall` via `CreditReservations`, settlements included',
    charge,
    `${fmt((held / charged) * 100, 1)} % of charges from a hold`,
  );

  // 4. Usage record: the edge's hand-off of the call's usage event (UsageRecorder: batched, flushed to
  //    BullMQ in Redis every USAGE_FLUSH_MS; the flushes counted).
  const started = performance.now();
  record(
    'usage record',
    '`usage.record(event)`, flushes to BullMQ included',
    await timeStage(
      () =>
        app.usage.record({
          method: 'GET',
          path: '/items',
          outcome: 'served',
          errorCode: null,
          chargedMicros: '1',
          paidWith: 'balance',
          accountId: caller.accountId,
          keyId: caller.keyId,
          apiId,
          item: 'proxy',
          status: 200,
          latencyMs: Math.round(performance.now() - started),
          bytesIn: 0,
          bytesOut: answerBody.length,
          costMicros: '1',
          chargeId: randomUUID(),
          holdId: null,
          at: new Date().toISOString(),
        }),
      { tailMs: edge.USAGE_FLUSH_MS + 50 },
    ),
  );

  // 5. Log line: production's logger (edgeLogger's serializers, written to a file in blocks of
  //    LOG_BUFFER_BYTES by BlockLogWriter, as apps/edge/src/server.ts), Fastify's per-request child logger
  //    (reqId: the request id genReqId makes) and the request-completed line of app.ts's onResponse hook.
  const logFd = openSync(join(tmp, 'request-log.ndjson'), 'a');
  const logStream =
    edge.LOG_BUFFER_BYTES === 0 ? pino.destination({ dest: logFd, sync: true }) : new BlockLogWriter({ fd: logFd, minLength: edge.LOG_BUFFER_BYTES });
  const logger = pino({ ...edgeLogger(edge), level: 'info' } as pino.LoggerOptions, logStream);
  const logged = { url: `/api/v1/proxy/${apiId}/items?x=1`, routeOptions: { url: '/api/v1/proxy/:apiId/*', config: {} } };
  record(
    'log line',
    'child logger per request + the `request completed` line, to a file',
    await timeStage(() => {
      const requestLog = logger.child({ reqId: randomUUID() });
      if (requestLog.isLevelEnabled('info'))
        requestLog.info(
          { req: { method: 'GET', url: loggedUrl(logged as never), remoteAddress: '127.0.0.1' }, res: { statusCode: 200 }, responseTime: 1.234 },
          'request completed',
        );
    }),
  );

  // 6. Header filtering: the call's plan (metered-call plans every call), the request headers it
  //    forwards and the answer headers it passes back (core/gateway/upstream.ts, call-plan.ts), and the
  //    proxy route's own answer headers (routes/proxy.ts' onSend hooks: a plain object here).
  const plan = await planMeteredCall(app.connectionCache, edge, api, caller.accountId, {
    method: 'GET',
    path: '/items',
    query: 'x=1',
    headers: rawHeaders,
  });
  record(
    'call plan',
    '`planMeteredCall` (cached API profile and connection)',
    await timeStage(() =>
      planMeteredCall(app.connectionCache, edge, api, caller.accountId, { method: 'GET', path: '/items', query: 'x=1', headers: rawHeaders }),
    ),
  );
  record(
    'header filtering',
    '`upstreamRequestHeaders` + `downstreamResponseHeaders` + the route\u2019s 3 answer headers',
    await timeStage(() => {
      const forwarded = upstreamRequestHeaders(rawHeaders, droppedRequestHeaders(plan, false));
      const passed = downstreamResponseHeaders(answerHeaders);
      passed['content-security-policy'] = "sandbox; default-src 'none'";
      passed['x-content-type-options'] = 'nosniff';
      passed['cross-origin-resource-policy'] = 'same-site';
      return forwarded.length + Object.keys(passed).length;
    }),
  );
  // The bare proxy's two loops (bench/children/bare-proxy.ts), on the same headers.
  const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host']);
  const incoming: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) incoming[rawHeaders[i]!] = rawHeaders[i + 1]!;
  bareOf(
    'header filtering',
    'its two header loops',
    await timeStage(() => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(incoming)) if (!HOP.has(name) && typeof value === 'string') headers[name] = value;
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answerHeaders)) if (!HOP.has(name) && value !== undefined) out[name] = value;
      return out;
    }),
  );

  // 7. Upstream request: the gateway's undici Agent (plugins/gateway.ts' options) dispatching the edge's
  //    UpstreamCall handler (apps/edge/src/http/upstream-call.ts) to the local upstream, answer read and
  //    dropped; beside it the bare proxy's Pool.
  const agent = new Agent({
    keepAliveTimeout: 10_000,
    connections: 256,
    headersTimeout: edge.PROXY_HEADERS_TIMEOUT_MS,
    bodyTimeout: edge.PROXY_BODY_TIMEOUT_MS,
    connect: { timeout: edge.PROXY_CONNECT_TIMEOUT_MS },
  });
  const forwardedHeaders = upstreamRequestHeaders(rawHeaders, droppedRequestHeaders(plan, false));
  record(
    'upstream request',
    'undici `Agent.dispatch` with the edge’s `UpstreamCall` handler, answer dropped',
    await timeStage(
      async () => {
        const call = new UpstreamCall(null);
        agent.dispatch({ origin: plan.origin, path: plan.upstreamPath, method: 'GET', headers: forwardedHeaders, body: null }, call);
        await call.response;
        await new Promise<void>((resolve, reject) => call.sendTo({ write: () => true, end: resolve, fail: reject }));
      },
      { lanes: CONNECTIONS },
    ),
  );
  const barePool = new Pool(upstreamOrigin, { connections: 256, keepAliveTimeout: 10_000 });
  bareOf(
    'upstream request',
    'undici `Pool.request`, answer dropped',
    await timeStage(
      async () => {
        const res = await barePool.request({ method: 'GET', path: '/items?x=1', headers: incoming, body: null });
        await res.body.dump();
      },
      { lanes: CONNECTIONS },
    ),
  );

  // 8. Answer piping: an answer of the upstream's size written to a socket the way the edge writes a
  //    plain answer (UpstreamCall hands each chunk, counted, to the reply's writer: no stream between
  //    them); a platform-key call's answer streamed through a SecretRedactor and piped, as the edge
  //    does; beside them the bare proxy's plain pipe.
  const sockets = await Promise.all(
    Array.from(
      { length: CONNECTIONS },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect(sinkPort, '127.0.0.1', () => resolve(s.setNoDelay(true))).once('error', reject);
        }),
    ),
  );
  // What undici gives the handler besides the chunks: the socket's pause and resume, here no-ops.
  const controller = { pause() {}, resume() {}, abort() {}, paused: false, aborted: false, reason: null } as unknown as Dispatcher.DispatchController;
  const writeOnce = (socket: Socket) =>
    new Promise<number>((resolve, reject) => {
      const call = new UpstreamCall(null);
      call.onRequestStart(controller);
      call.onResponseStart(controller, 200, {});
      call.sendTo({
        write: (chunk) => socket.write(chunk),
        end: () => resolve(call.bytesSent),
        fail: reject,
      });
      call.onResponseData(controller, answerBody);
      call.onResponseEnd();
    });
  const pipeOnce = (socket: Socket, redactor: SecretRedactor | null, counted: boolean) =>
    new Promise<number>((resolve, reject) => {
      const source = new Readable({ read() {} });
      const answer: Readable = redactor ? source.pipe(redactor.stream()) : source;
      let bytesOut = 0;
      if (counted) {
        answer.pause();
        answer.on('data', (chunk: Buffer) => {
          bytesOut += chunk.length;
        });
      }
      answer.once('end', () => resolve(bytesOut));
      answer.once('error', reject);
      answer.pipe(socket, { end: false });
      source.push(answerBody);
      source.push(null);
    });
  record(
    'answer piping',
    'the answer’s chunk handed by `UpstreamCall` to a writer on a socket, counted',
    await timeStage((_, lane) => writeOnce(sockets[lane]!), { lanes: CONNECTIONS }),
  );
  const redactor = new SecretRedactor([`sk_live_${'x'.repeat(32)}`]);
  const redacted = await timeStage((_, lane) => pipeOnce(sockets[lane]!, redactor, true), { lanes: CONNECTIONS });
  log(scenario, `answer piping through a SecretRedactor (platform-key calls): ${fmtSummary(redacted.cpu)} µs CPU`);
  bareOf(
    'answer piping',
    'the answer stream piped to a socket',
    await timeStage((_, lane) => pipeOnce(sockets[lane]!, null, false), { lanes: CONNECTIONS }),
  );
  for (const socket of sockets) socket.destroy();
  await Promise.all([agent.close(), barePool.close()]);
  await new Promise<void>((resolve) => logStream.flush(() => resolve()));
  await app.close();

  // --- the bare proxy's and the edge's CPU per call, as bench/proxy.ts measures them -----------------
  const barePort = await freePort();
  const bare = startChild('bare proxy', 'bench/children/bare-proxy.ts', [String(barePort), upstreamOrigin], { cpu: CPU_EDGE });
  children.push(bare);
  await waitForHttp(`http://127.0.0.1:${barePort}/`, 60_000, bare);
  const perCall = async (child: Child, origin: string, path: string, headers: Array<Record<string, string>>) => {
    await runJson('bench/children/load.ts', { mode: 'peak', origin, path, connections: CONNECTIONS, seconds: 2, headers }, { cpu: CPU_LOAD });
    const out: number[] = [];
    const rps: number[] = [];
    for (let r = 0; r < repeats; r += 1) {
      const before = childCpuMicros(child);
      const result = await runJson<{ ok: number; rps: number }>(
        'bench/children/load.ts',
        { mode: 'peak', origin, path, connections: CONNECTIONS, seconds, headers },
        { cpu: CPU_LOAD },
      );
      out.push((childCpuMicros(child) - before) / Math.max(1, result.ok));
      rps.push(result.rps);
    }
    return { cpu: summarize(out), rps: summarize(rps) };
  };
  const bareCall = await perCall(bare, `http://127.0.0.1:${barePort}`, '/items?x=1', []);
  log(scenario, `bare proxy: ${fmtSummary(bareCall.cpu, 1)} µs CPU per call at ${fmtSummary(bareCall.rps, 0)} req/s`);
  await bare.stop();

  let edgeCall: { cpu: Summary; rps: Summary } | null = null;
  if (MEASURE_EDGE) {
    const stackEnv: StackEnv = edgeEnv;
    await startWorkers(stackEnv, tmp, (child) => children.push(child));
    const port = await freePort();
    const edgeChild = startChild('edge', 'apps/edge/src/server.ts', [], {
      cpu: CPU_EDGE,
      nodeFlags: edgeNodeFlags,
      stdout: join(tmp, 'edge.log'),
      env: { ...stackEnv, HOST: '127.0.0.1', PORT: String(port) },
    });
    children.push(edgeChild);
    await waitForHttp(`http://127.0.0.1:${port}/api/v1/health`, 90_000, edgeChild);
    edgeCall = await perCall(edgeChild, `http://127.0.0.1:${port}`, `/api/v1/proxy/${apiId}/items?x=1`, [{ 'x-api-key': fullKey }]);
    log(scenario, `platform edge: ${fmtSummary(edgeCall.cpu, 1)} µs CPU per call at ${fmtSummary(edgeCall.rps, 0)} req/s`);
  }

  // --- the budget ---------------------------------------------------------------------------------
  // The whole call may cost bare ÷ 0.75. The work the bare proxy does too (headers, upstream request,
  // answer piping, and its HTTP server + Fastify routing) keeps the bare proxy's own cost as its budget;
  // the rest, bare ÷ 3, is shared among what metering adds, by the shares below (docs/decisions/proxy-stage-budget.md).
  const B = bareCall.cpu.median;
  const total = B / TARGET_RATIO;
  const extra = total - B;
  const shares: Record<string, number> = {
    'key lookup': 0.1,
    limiter: 0.1,
    'hold charge': 0.2,
    'usage record': 0.1,
    'log line': 0.15,
    'call plan': 0.05,
  };
  const restShare = 1 - Object.values(shares).reduce((a, b) => a + b, 0);
  const bareStages = stages.filter((s) => s.bare).reduce((a, s) => a + s.bare!.cpu.median, 0);
  const budgetOf = (s: (typeof stages)[number]) => (s.bare ? s.bare.cpu.median : shares[s.name]! * extra);
  const over = (µs: number, budget: number) => (µs > budget ? `**over** (×${fmt(µs / budget, 1)})` : 'within');
  const sumStages = stages.reduce((a, s) => a + s.cpu.median, 0);
  const restBudget = B - bareStages + restShare * extra;
  const remainder = edgeCall ? edgeCall.cpu.median - sumStages : Number.NaN;
  const rows = stages
    .map(
      (s) =>
        `| ${s.name} | ${s.what} | ${fmtSummary(s.cpu, 1)} | ${fmt(budgetOf(s), 1)}${s.bare ? ` (the bare proxy's: ${s.bare.what})` : ` (${fmt(shares[s.name]! * 100, 0)} % of the extra)`} | ${over(s.cpu.median, budgetOf(s))} |${s.note ? ` ${s.note} |` : ' |'}`,
    )
    .join('\n');
  const lines = [
    ...stages.map((s) => `${s.name} ${fmt(s.cpu.median, 1)} µs / budget ${fmt(budgetOf(s), 1)}`),
    `sum of stages ${fmt(sumStages, 1)} µs`,
    `bare ${fmt(B, 1)} µs, allowed ${fmt(total, 1)} µs`,
    edgeCall ? `edge ${fmt(edgeCall.cpu.median, 1)} µs, remainder ${fmt(remainder, 1)} µs (budget ${fmt(restBudget, 1)})` : 'edge not measured',
  ];
  for (const line of lines) log(scenario, line);

  writeSection(
    scenario,
    `## The metered call, stage by stage

${environmentLine()}

Command: \`npm run bench -- stages\` (\`BENCH_STAGES_ITERATIONS=${N}\`, \`BENCH_STAGES_RUNS=${RUNS}\`; the CPU per call of the bare proxy and
the edge over \`BENCH_REPEATS=${repeats}\` peak runs of \`BENCH_DURATION_SECONDS=${seconds}\` s). **This machine is shared and noisy** (other
engineers' tests run beside it): read the figures as a ranking and an order of magnitude, and re-run on a quiet machine before cutting by a few µs.

Each stage of the metered call's hot path runs **alone, in the benchmark's process**, with the edge's real code (the app built by
\`buildApp\`, its verifier, credit reservations and usage recorder; the limiter's \`RateCounters\`; core/gateway's header and plan
functions) and the real Postgres and Redis where the stage uses them, warmed up to its steady state: a cached key, local quota
tokens, an open credit hold. A stage is timed as **CPU time** (\`process.cpuUsage\`: user + system of every thread of the process,
so the Postgres client's and ioredis' parsing, libuv and the garbage collector count; Postgres and Redis themselves do not) over
${N} calls after a warm-up; the median (min–max) of ${RUNS} runs. Work a stage defers is waited for and counted with it (the hold's
settlements, the usage recorder's flushes). Upstream request and answer piping talk to separate processes (the scenario's upstream,
a socket that drops what it reads).

**Budget.** The bare Fastify proxy (\`bench/children/bare-proxy.ts\`) costs **${fmtSummary(bareCall.cpu, 1)} µs** of CPU per call
(its process's CPU over a peak run of ${CONNECTIONS} connections ÷ the calls answered, as the proxy scenario measures it; ${fmtSummary(bareCall.rps, 0)} req/s;
${placement()}). A ratio of ${TARGET_RATIO} allows a metered call **${fmt(total, 1)} µs**. The stages the bare proxy also has keep
the bare proxy's own cost of them as their budget (timed here the same way); its HTTP server and Fastify routing
(${fmt(B - bareStages, 1)} µs: its CPU per call minus those stages) stay in the remainder's budget. What metering adds, bare ÷ 3 =
**${fmt(extra, 1)} µs**, is shared: key lookup 10 %, limiter 10 %, hold charge 20 %, usage record 10 %, log line 15 %, call plan 5 %,
and ${fmt(restShare * 100, 0)} % for Fastify's hooks and the rest of the route (docs/decisions/proxy-stage-budget.md).

| stage | what is timed | CPU µs per call | budget µs | against the budget | note |
|---|---|---|---|---|---|
${rows}
| **sum of the stages** | | ${fmt(sumStages, 1)} | ${fmt(
      stages.reduce((a, s) => a + budgetOf(s), 0),
      1,
    )} | ${over(
      sumStages,
      stages.reduce((a, s) => a + budgetOf(s), 0),
    )} | |
| remainder: the edge's CPU per call minus the stages (HTTP server, Fastify's routing and hooks, the metered call's own code, allocation and GC) | ${edgeCall ? `edge ${fmtSummary(edgeCall.cpu, 1)} µs per call at ${fmtSummary(edgeCall.rps, 0)} req/s` : 'not measured (BENCH_STAGES_EDGE=0)'} | ${fmt(remainder, 1)} | ${fmt(restBudget, 1)} | ${edgeCall ? over(remainder, restBudget) : ''} | |
| **the whole call** | | ${edgeCall ? fmt(edgeCall.cpu.median, 1) : 'n/a'} | ${fmt(total, 1)} | ${edgeCall ? over(edgeCall.cpu.median, total) : ''} | ${edgeCall ? `CPU ratio bare / edge ${fmt(B / edgeCall.cpu.median)}; throughput ratio edge / bare in these runs ${fmt(edgeCall.rps.median / bareCall.rps.median)}` : ''} |

Answer piping through a \`SecretRedactor\` (calls made with the platform's key or an OAuth token) costs ${fmtSummary(redacted.cpu, 1)} µs.
The edge row is the full edge (\`apps/edge/src/server.ts\`, queue and Temporal workers beside it, \`LOG_LEVEL=info\`, one key and
account for every connection, where the proxy scenario gives each connection its own; its charges come from a hold), measured right
after the bare proxy the way the proxy scenario measures both. Each stage runs in a tight loop (one call at a time; the upstream request
and answer piping with ${CONNECTIONS} in flight, as under load), where caches and branch predictors are warmer than between a real call's
stages, so their sum is a floor rather than a share of the edge's figure: the remainder row is what no stage owns.
`,
  );
} finally {
  await stopAll();
  await dropRedisPrefix(settings.REDIS_URL, RUN_ID).catch(() => 0);
  await removeRunApis(settings.DATABASE_URL, 'bench-stages-', `bench-stages-${process.pid}`).catch((error: unknown) =>
    log(scenario, `could not remove the bench API: ${String(error)}`),
  );
}
