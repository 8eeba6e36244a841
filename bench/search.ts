// Search and discovery over the full catalog: p50/p95/p99 at 50 concurrent callers (closed loop,
// keep-alive, autocannon) against an edge running in a process of its own, asking the directory
// ranking process (workers/directory/main.ts) in another, as deployed, beside a bare Postgres
// full-text query from the same number of callers. Hundreds of distinct queries taken from the
// catalog and the discovery sets (names, typos, categories, keywords, task descriptions), so the
// figures measure ranking, not one cached answer; the Redis answer cache is measured separately
// (off, then on and warmed). Repeats BENCH_REPEATS times and writes median (min-max) into the
// "search" section of docs/BENCHMARKS.md. `npm run bench -- search` (scripts/bench.sh imports the
// catalog into platform_bench first).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { discover, listApis, LiveDirectoryIndex } from '#core/directory';
import { createSql } from '#db/sql';
import { profileMarkdown, summarizeProfile } from './lib/cpu-profile.js';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { procStat } from './lib/procs.js';
import { environmentLine, fmt, fmtSummary, log, percentile, summarize, writeSection } from './lib/report.js';
import { edgeNodeFlags } from './lib/stack.js';

const scenario = 'search';
const CALLERS = 50;
const duration = settings.BENCH_DURATION_SECONDS;
const repeats = settings.BENCH_REPEATS;
const root = fileURLToPath(new URL('..', import.meta.url));

await prepareDatabase();
const sql = createSql(settings.DATABASE_URL, { max: CALLERS, appName: 'bench-search' });
const index = new LiveDirectoryIndex(sql);
const [{ apis } = { apis: 0 }] = await sql<{ apis: number }[]>`select count(*)::int as apis from apis`;
if (apis < 2000) throw new Error(`platform_bench holds ${apis} APIs; import the catalog first (scripts/bench.sh does)`);

// --- the query mix: deterministic (seeded) samples of the catalog --------------------------------
let seed = 42;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const sample = <T>(items: T[], n: number) => {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
};
/** One edit in the longest word: a dropped, doubled or swapped letter (the typos people make). */
const typo = (text: string) => {
  const words = text.split(' ');
  const at = words.reduce((best, w, i) => (w.length > words[best]!.length ? i : best), 0);
  const w = words[at]!;
  if (w.length < 5) return null;
  const i = 1 + Math.floor(random() * (w.length - 3));
  const kind = Math.floor(random() * 3);
  words[at] =
    kind === 0 ? w.slice(0, i) + w.slice(i + 1) : kind === 1 ? w.slice(0, i) + w[i] + w.slice(i) : w.slice(0, i) + w[i + 1] + w[i] + w.slice(i + 2);
  return words.join(' ');
};

const catalog = await sql<{ name: string; categories: string[]; description: string }[]>`
  select name, categories, left(description, 200) as description from apis where source = 'apis.guru' order by id`;
const tasks = ['devset', 'heldout'].flatMap((set) =>
  (JSON.parse(readFileSync(`${root}docs/discovery-${set}.json`, 'utf8')) as { tasks: { q: string }[] }).tasks.map((t) => t.q),
);
const names = sample(
  catalog.map((a) => a.name.toLowerCase()),
  200,
);
const typos = sample(names, 150)
  .map(typo)
  .filter((t): t is string => t !== null)
  .slice(0, 100);
const categories = [...new Set(catalog.flatMap((a) => a.categories))].map((c) => c.replace(/_/g, ' '));
const taskWords = [...new Set(tasks.flatMap((q) => q.toLowerCase().split(/[^a-z]+/)).filter((w) => w.length >= 5))];
const keywordPairs = sample(taskWords, 60).map((w, i, all) => (i % 2 ? `${w} ${all[(i + 7) % all.length]}` : w));
// Task-like descriptions from the catalog: the first words of a description ("Send transactional email ...").
const described = sample(
  catalog.filter((a) => a.description.split(' ').length >= 6),
  160,
).map((a) =>
  a.description
    .replace(/[^\p{L}\p{N} ]+/gu, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 7)
    .join(' ')
    .toLowerCase(),
);
const unique = (items: string[]) => [...new Set(items.filter((q) => q.trim() && q.length <= 200))];
const searchQueries = unique([...names, ...typos, ...categories, ...keywordPairs]);
const discoverQueries = unique([...tasks, ...described, ...typos.slice(0, 40).map((t) => `find ${t}`)]);
log(scenario, `catalog ${apis} APIs; ${searchQueries.length} distinct searches, ${discoverQueries.length} distinct discovery queries`);

// --- the edge under test: its own process, like a deployment ------------------------------------
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

interface Edge {
  url: string;
  child: ChildProcess;
  /** The directory ranking process this edge asks. */
  ranker: ChildProcess;
}

/** Process CPU time (user + system, every thread) in ms, from /proc/<pid>/stat. */
const cpuMs = (pid: number): number => procStat(pid).cpuMicros / 1000;

/** The ranking process for one edge, with the edge's cache setting for task vectors. */
async function startRanker(cacheSeconds: number): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/directory/main.ts'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: settings.DATABASE_URL,
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      DIRECTORY_RANK_HOST: '127.0.0.1',
      DIRECTORY_RANK_PORT: String(port),
      // Without the answer cache, every discovery also embeds its task (no remembered task vectors).
      DISCOVERY_TASK_VECTORS: cacheSeconds === 0 ? '0' : '5000',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) return { child, url };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGTERM');
  throw new Error('the directory ranking process did not start');
}

async function startEdge(cacheSeconds: number, prefix: string, nodeFlags: string[] = []): Promise<Edge> {
  const port = await freePort();
  const ranker = await startRanker(cacheSeconds);
  const child = spawn(process.execPath, [...edgeNodeFlags, ...nodeFlags, '--import', 'tsx', 'apps/edge/src/server.ts'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: settings.DATABASE_URL,
      DIRECTORY_RANK_URL: ranker.url,
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      REDIS_PREFIX: prefix,
      DIRECTORY_CACHE_SECONDS: String(cacheSeconds),
      // Without the answer cache, every discovery also embeds its task (no remembered task vectors).
      DISCOVERY_TASK_VECTORS: cacheSeconds === 0 ? '0' : '5000',
      // Every request still goes through the limiter (one Redis call), with a budget the run cannot spend.
      RATE_LIMIT_PUBLIC_MAX: '1000000000',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  // Up to three minutes: the ranking process loads its index (a few seconds on a quiet host, much longer on a loaded one).
  for (let i = 0; i < 1800; i++) {
    try {
      // The first search waits for the ranking process's index; wait for it so runs measure the steady state.
      const res = await fetch(`${url}/api/v1/apis?q=weather&limit=1`);
      if (res.ok) return { url, child, ranker: ranker.child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGTERM');
  ranker.child.kill('SIGTERM');
  throw new Error('the edge did not start');
}

/**
 * One pass over every query, 8 at a time, before measuring: a fresh process compiles its hot paths
 * and builds each API's endpoint word list on first use; a deployed edge has long done both.
 */
async function warm(url: string, paths: string[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < paths.length) await fetch(url + paths[next++]!).then((res) => res.arrayBuffer());
    }),
  );
}

async function stopEdge(edge: Edge): Promise<void> {
  for (const child of [edge.child, edge.ranker]) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

/** CPU per request (ms) of the edge and of the ranking process over one run, from /proc. */
const cpuPerRequest = new Map<string, { edge: number; ranker: number }[]>();
async function measured(name: string, edge: Edge, run: () => Promise<Run>): Promise<Run> {
  const before = { edge: cpuMs(edge.child.pid!), ranker: cpuMs(edge.ranker.pid!) };
  const result = await run();
  const per = {
    edge: (cpuMs(edge.child.pid!) - before.edge) / Math.max(1, result.requests),
    ranker: (cpuMs(edge.ranker.pid!) - before.ranker) / Math.max(1, result.requests),
  };
  cpuPerRequest.set(name, [...(cpuPerRequest.get(name) ?? []), per]);
  log(scenario, `${name}: CPU per request ${fmt(per.edge, 2)} ms in the edge, ${fmt(per.ranker, 2)} ms in the ranking process`);
  return result;
}

interface Run {
  rps: number;
  p50: number;
  p95: number;
  p99: number;
  errors: number;
  requests: number;
}

/** Closed loop: each caller sends the next query of the shared round-robin as soon as its answer arrives. */
async function load(url: string, paths: string[], callers: number, seconds: number): Promise<Run> {
  const latencies: number[] = [];
  let next = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: callers,
        duration: seconds,
        requests: [{ method: 'GET', setupRequest: (request) => ({ ...request, path: paths[next++ % paths.length]! }) }],
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on('response', (_client, _status, _bytes, responseTime) => latencies.push(responseTime));
  });
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    errors: result.non2xx + result.errors + result.timeouts,
  };
}

/** The baseline: the same callers running a bare full-text query (same search words) straight against Postgres. */
async function bareFullText(seconds: number): Promise<Run> {
  const latencies: number[] = [];
  const end = Date.now() + seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (Date.now() < end) {
        const q = searchQueries[next++ % searchQueries.length]!;
        const t = performance.now();
        await sql`select id, name from apis where search_vector @@ websearch_to_tsquery('english', ${q})
                  order by ts_rank(search_vector, websearch_to_tsquery('english', ${q})) desc limit 50`;
        latencies.push(performance.now() - t);
      }
    }),
  );
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    errors: 0,
  };
}

/** The ranking alone, in this process, one query at a time: what a request costs before HTTP. */
async function inProcess(kind: 'search' | 'discover'): Promise<Run> {
  const latencies: number[] = [];
  const queries = kind === 'search' ? searchQueries : discoverQueries;
  await (kind === 'search' ? listApis(sql, index, { q: 'warm', limit: 50 }) : discover(index, 'warm up', 10));
  const started = performance.now();
  for (let round = 0; round < 3; round++) {
    for (const q of queries) {
      const t = performance.now();
      if (kind === 'search') await listApis(sql, index, { q, limit: 50 });
      else await discover(index, q, 10);
      latencies.push(performance.now() - t);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    errors: 0,
  };
}

const searchPaths = searchQueries.map((q) => `/api/v1/apis?q=${encodeURIComponent(q)}`);
const discoverPaths = discoverQueries.map((q) => `/api/v1/discover?q=${encodeURIComponent(q)}`);
const rows = new Map<string, Run[]>();
const record = (name: string, run: Run) => {
  rows.set(name, [...(rows.get(name) ?? []), run]);
  log(
    scenario,
    `${name}: ${fmt(run.rps, 0)} req/s, p50 ${fmt(run.p50, 1)} ms, p95 ${fmt(run.p95, 1)} ms, p99 ${fmt(run.p99, 1)} ms, errors ${run.errors}`,
  );
};
const loadBefore = os.loadavg();

for (let r = 1; r <= repeats; r++) {
  log(
    scenario,
    `repeat ${r}/${repeats} (load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')})`,
  );
  record('ranking in process, no HTTP: search (1 caller, 50 results)', await inProcess('search'));
  record('ranking in process, no HTTP: discover (1 caller, 10 results)', await inProcess('discover'));

  const cold = await startEdge(0, `bench-search-${process.pid}-${r}-cold`);
  await warm(cold.url, [...searchPaths, ...discoverPaths]);
  const half = Math.max(3, Math.round(duration / 2));
  record('GET /apis?q= · no answer cache · 1 caller', await measured('search, 1 caller', cold, () => load(cold.url, searchPaths, 1, half)));
  record('GET /discover?q= · no answer cache · 1 caller', await measured('discovery, 1 caller', cold, () => load(cold.url, discoverPaths, 1, half)));
  record(
    'GET /apis?q= · no answer cache · 50 callers',
    await measured('search, 50 callers', cold, () => load(cold.url, searchPaths, CALLERS, duration)),
  );
  record(
    'GET /discover?q= · no answer cache · 50 callers',
    await measured('discovery, 50 callers', cold, () => load(cold.url, discoverPaths, CALLERS, duration)),
  );
  await stopEdge(cold);

  const cached = await startEdge(30, `bench-search-${process.pid}-${r}-cached`);
  // Fill the shared answer cache with every query first: these rows measure cache hits only.
  await warm(cached.url, [...searchPaths, ...discoverPaths]);
  record('GET /apis?q= · Redis answer cache, warm · 50 callers', await load(cached.url, searchPaths, CALLERS, duration));
  record('GET /discover?q= · Redis answer cache, warm · 50 callers', await load(cached.url, discoverPaths, CALLERS, duration));
  await stopEdge(cached);

  record('bare Postgres full text (websearch_to_tsquery + ts_rank, top 50), no HTTP · 50 callers', await bareFullText(duration));
}
// Where the time goes: one more uncached discovery run at 50 callers with the edge under --cpu-prof
// (start-up and warm-up left out of the summary).
const profDir = mkdtempSync(join(os.tmpdir(), 'bench-search-profile-'));
const spawnedAt = Date.now();
const profiledEdge = await startEdge(0, `bench-search-${process.pid}-profiled`, ['--cpu-prof', '--cpu-prof-dir', profDir]);
await warm(profiledEdge.url, discoverPaths);
const profileFromMs = Date.now() - spawnedAt;
const profiledRun = await load(profiledEdge.url, discoverPaths, CALLERS, duration);
await stopEdge(profiledEdge);
const profFile = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
const searchProfile = profFile ? summarizeProfile(join(profDir, profFile), 12, profileFromMs) : null;
log(scenario, `profiled discovery run: ${fmt(profiledRun.rps, 0)} req/s, p95 ${fmt(profiledRun.p95, 1)} ms`);

const loadAfter = os.loadavg();
await index.close();
await sql.end({ timeout: 5 });

const table = [...rows].map(([name, runs]) => {
  const s = (pick: (run: Run) => number, digits: number) => fmtSummary(summarize(runs.map(pick)), digits);
  return `| ${name} | ${s((x) => x.rps, 0)} | ${s((x) => x.p50, 1)} | ${s((x) => x.p95, 1)} | ${s((x) => x.p99, 1)} | ${runs.reduce((n, x) => n + x.errors, 0)} |`;
});
const p95 = (name: string) => summarize(rows.get(name)!.map((x) => x.p95)).median;
const cpuTable = [...cpuPerRequest].map(
  ([name, runs]) =>
    `| ${name} | ${fmtSummary(summarize(runs.map((x) => x.edge)), 2)} | ${fmtSummary(summarize(runs.map((x) => x.ranker)), 2)} | ${fmtSummary(summarize(runs.map((x) => x.edge + x.ranker)), 2)} |`,
);
const searchP95 = p95('GET /apis?q= · no answer cache · 50 callers');
const discoverP95 = p95('GET /discover?q= · no answer cache · 50 callers');
const baselineP95 = p95('bare Postgres full text (websearch_to_tsquery + ts_rank, top 50), no HTTP · 50 callers');

writeSection(
  scenario,
  `## Directory search and discovery

${environmentLine()} · load average ${loadBefore.map((l) => l.toFixed(1)).join(' ')} at the start, ${loadAfter.map((l) => l.toFixed(1)).join(' ')} at the end
(1, 5, 15 min; the machine's 2 cores are shared with other engineers' test runs).

Command: \`npm run bench -- search\` (script \`bench/search.ts\`; \`BENCH_DURATION_SECONDS=${duration}\`,
\`BENCH_REPEATS=${repeats}\`). Catalog: ${apis} APIs. The edge runs in its own process (\`apps/edge/src/server.ts\`,
one instance), asking the directory ranking process (\`workers/directory/main.ts\`, its own process, \`DIRECTORY_RANK_WORKERS=${process.env.DIRECTORY_RANK_WORKERS ?? 2}\` ranking threads) over kept-alive HTTP on loopback, and autocannon drives it from the benchmark process with keep-alive, closed loop: each caller sends its
next request when the previous answer arrives. Every request passes the public rate limiter (one Redis call).
Queries: ${searchQueries.length} distinct searches (API names, one-letter typos of names, categories, keywords) and
${discoverQueries.length} distinct discovery queries (the development and held-out tasks, task-like phrases from
descriptions, typos), deterministic samples of the catalog, sent round-robin. Each fresh edge process first
answers every query once (JIT, per-API endpoint word lists built on first use). "No answer cache" sets
\`DIRECTORY_CACHE_SECONDS=0\` and \`DISCOVERY_TASK_VECTORS=0\`: every request ranks, and every discovery embeds its task. "Redis answer cache, warm" first asks every query once, so the
run measures cache hits. The baseline runs a bare full-text query over the same search words from the same 50
callers straight to Postgres (no HTTP, no ranking features). Cells: median (min–max) of ${repeats} runs, ${duration} s each.

| what | req/s | p50 ms | p95 ms | p99 ms | errors |
|---|---|---|---|---|---|
${table.join('\n')}

CPU per request, uncached (process CPU of every thread from \`/proc/<pid>/stat\` over each run, divided by its
requests; steadier than latency on a shared host). Cells: median (min–max) of ${repeats} runs, ms.

| run | edge | ranking process | both |
|---|---|---|---|
${cpuTable.join('\n')}

**Target (issue 8, issue 34): p95 under 20 ms at 50 concurrent callers.** Uncached, search p95 is ${fmt(searchP95, 1)} ms and
discovery p95 ${fmt(discoverP95, 1)} ms (medians), beside ${fmt(baselineP95, 1)} ms for the bare Postgres
full-text query: ${searchP95 < 20 && discoverP95 < 20 ? '**met**' : '**not met** for ' + [searchP95 >= 20 ? 'search' : '', discoverP95 >= 20 ? 'discovery' : ''].filter(Boolean).join(' and ')}.
Issue 5's "well under 50 ms at p95": ${searchP95 < 50 && discoverP95 < 50 ? 'met' : 'not met'} uncached.

### Where the edge's time goes (discovery, no answer cache, 50 callers)

One more run (${fmt(profiledRun.rps, 0)} req/s, p95 ${fmt(profiledRun.p95, 1)} ms under the profiler) with the edge under \`node --cpu-prof\`;
self time of its main thread during that run (the ranking itself runs in the ranking process, in the table above). Each request cost ${searchProfile ? fmt(searchProfile.busyMs / Math.max(1, profiledRun.requests), 2) : '?'} ms of the edge's main-thread CPU.

${searchProfile ? profileMarkdown(searchProfile) : '(no profile was written)'}`,
);
process.exit(0);
