// The metered proxy (auth + rate limit + charge + forward + usage event) beside three baselines in the
// same run: the upstream hit directly, a bare Fastify proxy (undici, no metering) and nginx
// `proxy_pass`. Every target, the upstream and the load generator run as separate processes (see
// bench/lib/procs.ts for how they are pinned). Peak throughput with autocannon (closed loop), then
// latency at a fixed rate of half the bare proxy's peak (open loop, wrk2-style). The ledger is
// checked after every run against the platform. Finally the platform edge runs once more under
// `node --cpu-prof` and the profile's top self-time functions are written out.
// `npm run bench -- proxy`
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createAccount } from '#db/accounts';
import { runApiCli } from '#cli/api-cli';
import { createKey } from '#db/keys';
import pino from 'pino';
import { edgeSettings } from '#edge/config';
import { ChargeBatcher } from '#core/billing';
import { credit } from '#db/ledger';
import { createSql } from '#db/sql';
import { profileMarkdown, summarizeProfile } from './lib/cpu-profile.js';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { CPU_EDGE, CPU_LOAD, freePort, loadAverage, placement, runJson, startChild, waitForHttp, type Child } from './lib/procs.js';
import { environmentLine, fmt, fmtSummary, log, summarize, writeSection, type Summary } from './lib/report.js';

const scenario = 'proxy';
const CONNECTIONS = Number(process.env.BENCH_PROXY_CONNECTIONS ?? 32);
const OPENING_MICROS = 1_000_000_000_000n;
const seconds = settings.BENCH_DURATION_SECONDS;
const repeats = settings.BENCH_REPEATS;
const startLoad = loadAverage();
/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = Number(process.env.BENCH_CLOCK_TICKS ?? 100);

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  sent: number;
  errors: number;
}

await prepareDatabase();
const sql = createSql(settings.DATABASE_URL, { max: 4, appName: 'bench-proxy' });
const tmp = mkdtempSync(join(os.tmpdir(), 'bench-proxy-'));
const children: Child[] = [];
const stopAll = async () => {
  await Promise.allSettled(children.map((c) => c.stop()));
};
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));

try {
  // --- the upstream --------------------------------------------------------------------------
  const upstreamPort = await freePort();
  const upstreamOrigin = `http://127.0.0.1:${upstreamPort}`;
  const upstream = startChild('upstream', 'bench/children/upstream.ts', [String(upstreamPort)], { cpu: CPU_LOAD });
  children.push(upstream);
  await waitForHttp(`${upstreamOrigin}/`, 30_000, upstream);
  const bodyBytes = (await (await fetch(`${upstreamOrigin}/items`)).arrayBuffer()).byteLength;

  // --- the platform's API row and accounts -------------------------------------------------------
  const apiId = `bench-proxy-${process.pid}`;
  await runApiCli(['add', '--id', apiId, '--name', 'Bench upstream', '--base-url', upstreamOrigin, '--price', '0.000001'], { ...process.env, DATABASE_URL: settings.DATABASE_URL });
  // One account per connection: this measures the proxy, not the serialisation of charges on one hot
  // account row (that is the charges scenario's "one hot account").
  const accounts = await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, i) => {
      const account = await createAccount(sql, { email: `bench-proxy-${process.pid}-${i}-${Date.now()}@example.test`, passwordHash: null });
      if (!account) throw new Error('could not create a bench account');
      await credit(sql, { accountId: account.id, amountMicros: OPENING_MICROS, kind: 'adjustment' });
      const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: 'bench' });
      return { id: account.id, fullKey };
    }),
  );
  const accountIds = accounts.map((a) => a.id);
  const keyHeaders = accounts.map((a) => ({ 'x-api-key': a.fullKey }));

  // --- nginx ----------------------------------------------------------------------------------------
  const nginxPort = await freePort();
  const nginxBin = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => {
    try {
      return readFileSync(p).length > 0;
    } catch {
      return false;
    }
  });
  if (!nginxBin) throw new Error('nginx is not installed (scripts/bench.sh installs it with apt-get)');
  writeFileSync(
    join(tmp, 'nginx.conf'),
    `${process.getuid?.() === 0 ? 'user root;\n' : ''}worker_processes 1;
daemon off;
pid ${tmp}/nginx.pid;
error_log ${tmp}/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body; proxy_temp_path ${tmp}/proxy; fastcgi_temp_path ${tmp}/fcgi; uwsgi_temp_path ${tmp}/uwsgi; scgi_temp_path ${tmp}/scgi;
  upstream bench_upstream { server 127.0.0.1:${upstreamPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${nginxPort};
    keepalive_requests 1000000;
    location / { proxy_pass http://bench_upstream; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
  );
  const nginx = startChild('nginx', nginxBin, ['-p', tmp, '-c', join(tmp, 'nginx.conf'), '-e', join(tmp, 'nginx-error.log')], { cpu: CPU_EDGE });
  children.push(nginx);
  await waitForHttp(`http://127.0.0.1:${nginxPort}/`, 30_000, nginx);

  // --- the bare Fastify proxy ---------------------------------------------------------------------
  const barePort = await freePort();
  const bare = startChild('bare proxy', 'bench/children/bare-proxy.ts', [String(barePort), upstreamOrigin], { cpu: CPU_EDGE });
  children.push(bare);
  await waitForHttp(`http://127.0.0.1:${barePort}/`, 60_000, bare);

  // --- the platform edge: the real entry point, as `npm run start:edge` runs it ---------------------
  const edgeLog = join(tmp, 'edge.log');
  const startEdge = async (nodeFlags: string[] = []) => {
    const port = await freePort();
    const child = startChild('edge', 'apps/edge/src/server.ts', [], {
      cpu: CPU_EDGE,
      stdout: edgeLog,
      nodeFlags,
      env: {
        NODE_ENV: 'development', // production settings refuse the loopback upstream
        ALLOW_PRIVATE_UPSTREAMS: 'true',
        LOG_LEVEL: process.env.BENCH_EDGE_LOG_LEVEL ?? 'info',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: settings.DATABASE_URL,
        REDIS_PREFIX: `bench-proxy-${process.pid}`,
        // The limiter still runs on every call (one Redis script); only its budget is out of the way.
        RATE_LIMIT_KEY_MAX: '1000000000',
        RATE_LIMIT_ACCOUNT_MAX: '1000000000',
      },
    });
    children.push(child);
    await waitForHttp(`http://127.0.0.1:${port}/api/v1/health`, 90_000, child);
    return { child, origin: `http://127.0.0.1:${port}` };
  };
  let edge = await startEdge();

  const targets = {
    direct: { label: 'upstream directly', origin: upstreamOrigin, path: '/items?x=1', headers: [] as Array<Record<string, string>> },
    nginx: { label: 'nginx proxy_pass', origin: `http://127.0.0.1:${nginxPort}`, path: '/items?x=1', headers: [] },
    bare: { label: 'bare Fastify proxy (undici)', origin: `http://127.0.0.1:${barePort}`, path: '/items?x=1', headers: [] },
    platform: { label: 'platform metered proxy', origin: edge.origin, path: `/api/v1/proxy/${apiId}/items?x=1`, headers: keyHeaders },
  };
  type Target = keyof typeof targets;
  const order: Target[] = ['direct', 'nginx', 'bare', 'platform'];

  let okTotal = 0;
  let sentTotal = 0;
  async function verifyLedger(): Promise<number> {
    const [row] = await sql<{ charges: string; balance: bigint; sum: bigint }[]>`
      select (select count(*) from ledger_entries where account_id = any(${accountIds}::uuid[]) and kind = 'charge')::text as charges,
             (select sum(balance_micros) from accounts where id = any(${accountIds}::uuid[]))::bigint as balance,
             (select sum(amount_micros) from ledger_entries where account_id = any(${accountIds}::uuid[]))::bigint as sum`;
    const charges = Number(row?.charges ?? -1);
    const opening = OPENING_MICROS * BigInt(accounts.length);
    // Calls cut off when a run ends were sent and may be charged without their answer being counted.
    if (!row || charges < okTotal || charges > sentTotal || row.balance !== row.sum || row.balance !== opening - BigInt(charges)) {
      throw new Error(`ledger check failed: ${charges} charges for ${okTotal}..${sentTotal} calls, balance ${row?.balance}, ledger sum ${row?.sum}`);
    }
    return charges;
  }

  async function load(target: Target, mode: 'peak' | 'rate', secs: number, rate?: number): Promise<LoadResult> {
    const t = targets[target];
    const result = await runJson<LoadResult>('bench/children/load.ts', { mode, origin: t.origin, path: t.path, connections: CONNECTIONS, seconds: secs, rate, headers: t.headers }, { cpu: CPU_LOAD });
    if (result.errors > 0 && mode === 'rate') throw new Error(`${t.label}: ${result.errors} failed requests at ${rate}/s`);
    if (target === 'platform') {
      okTotal += result.ok;
      sentTotal += result.sent;
      await verifyLedger();
    }
    return result;
  }

  log(scenario, `load average at start ${startLoad}; ${placement()}`);
  for (const target of order) await load(target, 'peak', 2); // warm-up (JIT, pools)

  // CPU time (user + system) the process under test spent per answered call during a peak run, from
  // /proc (taskset execs the node binary, so the child's pid is the proxy's own).
  const cpuMicros = (child: Child) => {
    const fields = readFileSync(`/proc/${child.process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  };
  const measured: Partial<Record<Target, () => Child>> = { bare: () => bare, platform: () => edge.child };
  const cpuPerAnswer: Record<'bare' | 'platform', number[]> = { bare: [], platform: [] };
  const peak: Record<Target, LoadResult[]> = { direct: [], nginx: [], bare: [], platform: [] };
  for (let run = 1; run <= repeats; run += 1) {
    for (const target of order) {
      const proc = measured[target]?.();
      const before = proc ? cpuMicros(proc) : 0;
      const r = await load(target, 'peak', seconds);
      if (proc && (target === 'bare' || target === 'platform')) cpuPerAnswer[target].push((cpuMicros(proc) - before) / Math.max(1, r.ok));
      peak[target].push(r);
      log(scenario, `peak run ${run} ${target}: ${fmt(r.rps, 0)} req/s, p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms, errors ${r.errors}`);
    }
  }
  const bareRps = summarize(peak.bare.map((r) => r.rps)).median;
  const rate = Math.max(1, Math.round(bareRps / 2));
  const fixed: Record<Target, LoadResult[]> = { direct: [], nginx: [], bare: [], platform: [] };
  // A target whose own peak is below the rate cannot keep up: its queue grows for the whole run, so
  // its runs are kept short (3 s); the latency then says "overloaded", whatever the duration.
  const overloaded = (t: Target) => summarize(peak[t].map((r) => r.rps)).median < rate;
  for (let run = 1; run <= repeats; run += 1) {
    for (const target of order) {
      const r = await load(target, 'rate', overloaded(target) ? Math.min(seconds, 3) : seconds, rate);
      fixed[target].push(r);
      log(scenario, `rate ${rate}/s run ${run} ${target}: p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms`);
    }
  }
  // Informational: latency at half the platform's own peak (the platform and the bare proxy).
  const ownRate = Math.max(1, Math.round(summarize(peak.platform.map((r) => r.rps)).median / 2));
  const own: Record<'bare' | 'platform', LoadResult[]> = { bare: [], platform: [] };
  for (let run = 1; run <= repeats; run += 1) {
    for (const target of ['bare', 'platform'] as const) {
      const r = await load(target, 'rate', seconds, ownRate);
      own[target].push(r);
      log(scenario, `rate ${ownRate}/s run ${run} ${target}: p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms`);
    }
  }

  // The charge alone, from Node, at the same concurrency and pool size as the edge: the ceiling the
  // one synchronous Postgres statement per call puts on the metered proxy (own accounts, so the ledger
  // check above stays exact).
  const ceilingAccounts = await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, i) => {
      const account = await createAccount(sql, { email: `bench-proxy-ceiling-${process.pid}-${i}-${Date.now()}@example.test`, passwordHash: null });
      if (!account) throw new Error('could not create a bench account');
      await credit(sql, { accountId: account.id, amountMicros: OPENING_MICROS, kind: 'adjustment' });
      return account.id;
    }),
  );
  const chargeSql = createSql(settings.DATABASE_URL, { max: 20, appName: 'bench-proxy-ceiling' });
  const edgeDefaults = edgeSettings.parse({});
  const batcher = new ChargeBatcher(chargeSql, { maxBatch: edgeDefaults.CHARGE_BATCH_MAX, maxInFlight: edgeDefaults.CHARGE_BATCH_CONCURRENCY, log: pino({ level: 'warn' }) });
  const ceiling: number[] = [];
  for (let run = 1; run <= repeats; run += 1) {
    let n = 0;
    const end = Date.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(
      ceilingAccounts.map(async (accountId) => {
        while (Date.now() < end) {
          const result = await batcher.charge({ accountId, costMicros: 1n, item: 'proxy', apiId });
          if (!result.ok) throw new Error('ceiling charge refused');
          n += 1;
        }
      }),
    );
    ceiling.push(n / ((performance.now() - t0) / 1000));
    log(scenario, `charge ceiling run ${run}: ${fmt(ceiling.at(-1)!, 0)} charges/s`);
  }
  await chargeSql.end({ timeout: 5 });

  const charges = await verifyLedger();
  // Every charge of one statement carries that transaction's now(): distinct timestamps count the commits.
  const [commitRow] = await sql<{ charges: string; commits: string }[]>`
    select count(*)::text as charges, count(distinct created_at)::text as commits
      from ledger_entries where account_id = any(${accountIds}::uuid[]) and kind = 'charge'`;
  const chargesPerCommit = Number(commitRow?.charges ?? 0) / Math.max(1, Number(commitRow?.commits ?? 0));
  const logLines = readFileSync(edgeLog, 'utf8').split('\n').filter((l) => l.trim()).length;
  const edgeRequests = sentTotal + 1; // + the health probe
  await edge.child.stop();

  // --- the profile ----------------------------------------------------------------------------------
  const profDir = join(tmp, 'profile');
  const spawned = Date.now();
  edge = await startEdge(['--cpu-prof', '--cpu-prof-dir', profDir]);
  targets.platform.origin = edge.origin;
  await load('platform', 'peak', 2);
  const profileFromMs = Date.now() - spawned; // start-up and warm-up are left out of the summary
  const profiled = await load('platform', 'peak', seconds);
  await edge.child.stop();
  const profFile = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
  const summary = profFile ? summarizeProfile(join(profDir, profFile), 15, profileFromMs) : null;
  const profile = summary ? profileMarkdown(summary) : '(no profile was written)';
  const cpuPerCall = summary ? summary.busyMs / Math.max(1, profiled.ok) : Number.NaN;
  const timePerCall = (CONNECTIONS / profiled.rps) * 1000;
  await verifyLedger();

  // --- the report ---------------------------------------------------------------------------------
  const s = (rs: LoadResult[], k: keyof LoadResult): Summary => summarize(rs.map((r) => r[k]));
  const ratio = (a: LoadResult[], b: LoadResult[]) => summarize(a.map((r, i) => r.rps / b[i]!.rps));
  const added = (a: LoadResult[], b: LoadResult[], k: 'p50' | 'p99') => summarize(a.map((r, i) => r[k] - b[i]![k]));
  const throughputRatio = ratio(peak.platform, peak.bare);
  const addedP50 = added(fixed.platform, fixed.bare, 'p50');
  const addedP99 = added(fixed.platform, fixed.bare, 'p99');
  const verdict = (ok: boolean) => (ok ? '**met**' : '**missed**');
  const rows = order
    .map((t) => `| ${targets[t].label}${overloaded(t) ? ` (overloaded at ${rate}/s: 3 s runs)` : ''} | ${fmtSummary(s(peak[t], 'rps'), 0)} | ${fmtSummary(s(peak[t], 'p50'))} | ${fmtSummary(s(peak[t], 'p99'))} | ${fmtSummary(s(fixed[t], 'p50'))} | ${fmtSummary(s(fixed[t], 'p99'))} |`)
    .join('\n');

  writeSection(
    scenario,
    `## The metered proxy

${environmentLine()}

Load average at the start: ${startLoad} (1 / 5 / 15 min; other engineers' tests share this machine).
Command: \`npm run bench -- proxy\` (\`BENCH_DURATION_SECONDS=${seconds}\`, \`BENCH_REPEATS=${repeats}\`); median (min–max) over ${repeats} runs.

Every call is \`GET …/items?x=1\` answered by a local node:http upstream with a ${bodyBytes}-byte JSON body. Through the platform each call
is authenticated (API key, cached verification), rate limited (Redis: the hits of one event-loop turn share one script call),
charged (Postgres, group commit: the charges waiting together share one statement and commit, each call waiting for its own), forwarded
(undici, streamed) and leaves a usage event (batched to BullMQ); each of the ${CONNECTIONS} connections uses its own account and key. The edge is
the real entry point (\`apps/edge/src/server.ts\`, \`LOG_LEVEL=${process.env.BENCH_EDGE_LOG_LEVEL ?? 'info'}\`, one line per request, written to a file
in blocks of \`LOG_BUFFER_BYTES\`).
Baselines: the same upstream directly; a bare Fastify proxy (\`bench/children/bare-proxy.ts\`: undici Pool, no auth, metering or logging);
Debian's nginx \`proxy_pass\` (1 worker, upstream keep-alive, access log off).
Processes: ${placement()}.

- **Peak**: autocannon, ${CONNECTIONS} keep-alive connections, closed loop, ${seconds} s per run.
- **Fixed rate**: ${rate} requests/s (half the bare proxy's median peak), open loop, wrk2-style: an undici pool of ${CONNECTIONS}
  keep-alive connections sends request *i* at *start + i/rate* and measures its latency from that due time, so stalls are not
  hidden (no coordinated omission). autocannon's own \`overallRate\` sends each second's quota in a burst, which measures queueing, not latency at that rate.

| target | peak req/s | p50 at peak (ms) | p99 at peak (ms) | p50 at ${rate}/s (ms) | p99 at ${rate}/s (ms) |
|---|---|---|---|---|---|
${rows}

| ratio (per run, median (min–max)) | measured | target |
|---|---|---|
| platform / bare Fastify proxy, peak throughput | ${fmtSummary(throughputRatio)} | ≥ 0.75: ${verdict(throughputRatio.median >= 0.75)} |
| added p50 at ${rate}/s vs the bare proxy (ms) | ${fmtSummary(addedP50)} | ≤ +1.5: ${verdict(addedP50.median <= 1.5)} |
| added p99 at ${rate}/s vs the bare proxy (ms) | ${fmtSummary(addedP99)} | ≤ +5: ${verdict(addedP99.median <= 5)} |
| CPU per answered call at peak (µs), bare proxy / platform | ${fmtSummary(summarize(cpuPerAnswer.bare), 0)} / ${fmtSummary(summarize(cpuPerAnswer.platform), 0)} | – |
| platform / nginx, peak throughput | ${fmtSummary(ratio(peak.platform, peak.nginx))} | – |
| bare proxy / upstream directly, peak throughput | ${fmtSummary(ratio(peak.bare, peak.direct))} | – |
| added p50 / p99 at ${rate}/s vs the upstream directly (ms) | ${fmtSummary(added(fixed.platform, fixed.direct, 'p50'))} / ${fmtSummary(added(fixed.platform, fixed.direct, 'p99'))} | – |

Informational, at ${ownRate} requests/s (half the platform's own median peak): bare proxy p50 ${fmtSummary(s(own.bare, 'p50'))} ms, p99 ${fmtSummary(s(own.bare, 'p99'))} ms;
platform p50 ${fmtSummary(s(own.platform, 'p50'))} ms, p99 ${fmtSummary(s(own.platform, 'p99'))} ms.

The platform's ceiling: charging alone, the way the edge charges (\`ChargeBatcher\` over \`chargeBatch()\`, ${CONNECTIONS} callers on their own
accounts, a pool of 20 connections like the edge's \`DATABASE_POOL_MAX\`, synchronous commit) runs at ${fmtSummary(summarize(ceiling), 0)} charges/s on this machine.

Ledger: checked after every platform run (one charge row per charged call, balances equal to the ledger's sum, no charge
lost or doubled): ${charges} charges in total, in ${fmt(chargesPerCommit)} charges per commit on average (group commit; counted from the
ledger rows' transaction timestamps). The edge wrote ${fmt(logLines / edgeRequests)} log lines per request at \`LOG_LEVEL=${process.env.BENCH_EDGE_LOG_LEVEL ?? 'info'}\`.

### Where the edge's time goes

One more peak run (${fmt(profiled.rps, 0)} req/s under the profiler) with the edge under \`node --cpu-prof\`; self time of the edge's main thread during that run (start-up and warm-up left out):

${profile}

Reading it: under the profiler each call cost the edge ${fmt(cpuPerCall, 3)} ms of CPU, while each of the ${CONNECTIONS} connections waited
${fmt(timePerCall)} ms per call (${CONNECTIONS} / throughput). The rest is waiting: on the rate limiter's Redis round trip, on the charge's
Postgres commit and on the upstream, with Postgres, Redis and the machine's other load competing for both cores.`,
  );
} finally {
  await stopAll();
  await sql.end({ timeout: 5 });
}
