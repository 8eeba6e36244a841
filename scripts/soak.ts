// The edge's memory under an hour of mixed load (issue 34: an edge in at most 300 MB, its last 30
// minutes growing by less than 10%). Not part of `npm test` or `npm run bench`: `npm run soak`.
// Starts the platform as production would: the edge's real entry point (apps/edge/src/server.ts, run
// from the bundle `npm run build:edge` writes, as `npm run up` runs it; BENCH_EDGE=source runs the source)
// with the queue workers, the Temporal worker and the directory ranking process beside it
// (bench/lib/stack.ts; the edge asks the ranking process for search and discovery), on the bench
// database (scripts/bench.sh provisions it with the full APIs.guru catalog, so discovery ranks over
// the real directory). Drives mixed load for SOAK_MINUTES (default 60): metered proxy calls to a local
// upstream, discovery queries with varied tasks (the tuning sets' tasks), activity SSE streams opened
// and closed, and MCP tool calls (discover_apis, get_balance, call_api). Prints the edge's total
// resident memory (VmRSS of /proc/<pid>/status: every thread, the ranking threads included) every
// minute, and at the end its start / peak / last and the growth over the last half; the same, apart,
// for the directory ranking process (which holds the index and the embedding model for every edge).
// The edge runs with EDGE_NODE_OPTIONS as production would (unset: DEFAULT_EDGE_NODE_OPTIONS); SOAK_EDGE_NODE_FLAGS
// replaces them, e.g. "--max-old-space-size=192 --max-semi-space-size=8" (apps/edge/src/config.ts,
// LOW_MEMORY_EDGE_NODE_OPTIONS) to measure the smaller edge.
// SOAK_HEAP_SNAPSHOTS=1 also writes two heap snapshots of the edge's main thread (after the first
// minute and at the end; `--heapsnapshot-signal`) and prints the constructors whose retained self
// size grew most between them.
import { createReadStream, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { runApiCli } from '#cli/api-cli';
import { createAccount } from '#db/accounts';
import { createKey } from '#db/keys';
import { credit } from '#db/ledger';
import { createSql } from '#db/sql';
import { benchSettings as settings, prepareDatabase } from '../bench/lib/env.js';
import { freePort, ROOT, startChild, waitForHttp, type Child } from '../bench/lib/procs.js';
import { dropRedisPrefix, edgeEntry, edgeEntryNote, edgeNodeFlags, removeRunApis, startWorkers, type StackEnv } from '../bench/lib/stack.js';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 60);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 60) * 1000;
/** Paced rates of the load's parts (per second), low enough to leave the machine usable. */
const PROXY_RPS = Number(process.env.SOAK_PROXY_RPS ?? 100);
const DISCOVER_RPS = Number(process.env.SOAK_DISCOVER_RPS ?? 4);
const MCP_RPS = Number(process.env.SOAK_MCP_RPS ?? 4);
/** A stream is opened every SSE_OPEN_MS and kept SSE_HOLD_MS: about hold/open streams at any time. */
const SSE_OPEN_MS = Number(process.env.SOAK_SSE_OPEN_MS ?? 1000);
const SSE_HOLD_MS = Number(process.env.SOAK_SSE_HOLD_MS ?? 8000);
const HEAP_SNAPSHOTS = process.env.SOAK_HEAP_SNAPSHOTS === '1';
/** Extra node flags for the edge only (space-separated), e.g. V8 heap limits to measure. */
const EDGE_NODE_FLAGS = process.env.SOAK_EDGE_NODE_FLAGS === undefined ? edgeNodeFlags : process.env.SOAK_EDGE_NODE_FLAGS.split(' ').filter(Boolean);
const ACCOUNTS = 8;
const RUN_ID = `soak-${process.pid}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (line: string) => console.log(`[soak] ${line}`);
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

await prepareDatabase();
const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'soak' });
const tmp = mkdtempSync(join(os.tmpdir(), 'soak-'));
const children: Child[] = [];
const stopAll = async () => {
  for (const child of children.toReversed()) await child.stop().catch(() => {});
};
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));

/** The edge's resident memory (kB: all, anonymous, file-backed) and thread count, from /proc/<pid>/status. */
function memoryOf(pid: number): { rssKb: number; anonKb: number; fileKb: number; threads: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssKb: field('VmRSS'), anonKb: field('RssAnon'), fileKb: field('RssFile'), threads: field('Threads') };
}

/**
 * The edge's resident memory by kind of mapping (/proc/<pid>/smaps, MB): V8's heap pages (256 kB
 * anonymous mappings, every isolate: the main thread and each ranking thread), malloc's main heap and
 * thread arenas (64 MB mappings: native allocations, the embedding model's runtime among them), the
 * rest anonymous, and files (code).
 */
function memoryByKind(pid: number): Record<string, number> {
  const kinds: Record<string, number> = { 'V8 heap pages': 0, 'malloc heap': 0, 'malloc arenas': 0, 'other anonymous': 0, files: 0 };
  let kind = 'files';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const mapping = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const kb = (parseInt(mapping[2]!, 16) - parseInt(mapping[1]!, 16)) / 1024;
      const name = mapping[3]!.trim();
      kind =
        name === '[heap]'
          ? 'malloc heap'
          : name !== ''
            ? 'files'
            : kb === 256
              ? 'V8 heap pages'
              : kb >= 65_536 - 1024 && kb <= 65_536
                ? 'malloc arenas'
                : 'other anonymous';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kinds[kind]! += Number(rss[1]) / 1024;
  }
  return kinds;
}

try {
  // --- the upstream, the API and the accounts ----------------------------------------------------
  const upstreamPort = await freePort();
  const upstreamOrigin = `http://127.0.0.1:${upstreamPort}`;
  const upstream = startChild('upstream', 'bench/children/upstream.ts', [String(upstreamPort)]);
  children.push(upstream);
  await waitForHttp(`${upstreamOrigin}/`, 30_000, upstream);
  const apiId = `soak-${process.pid}`;
  await runApiCli(['add', '--id', apiId, '--name', 'Soak upstream', '--base-url', upstreamOrigin, '--price', '0.000001'], {
    ...process.env,
    DATABASE_URL: settings.DATABASE_URL,
  });
  const keys = await Promise.all(
    Array.from({ length: ACCOUNTS }, async (_, i) => {
      const account = await createAccount(sql, { email: `soak-${process.pid}-${i}-${Date.now()}@example.test`, ownerPersonId: null });
      if (!account) throw new Error('could not create a soak account');
      await credit(sql, { accountId: account.id, amountMicros: 1_000_000_000_000n, kind: 'adjustment' });
      return (await createKey(sql, { accountId: account.id, kind: 'api', name: 'soak' })).fullKey;
    }),
  );
  const tasks = ['devset', 'heldout', 'everyday', 'fresh'].flatMap((set) =>
    (JSON.parse(readFileSync(join(ROOT, `docs/discovery-${set}.json`), 'utf8')) as { tasks: { q: string }[] }).tasks.map((t) => t.q),
  );

  // --- the stack and the edge, as production runs them -------------------------------------------
  const stackEnv: StackEnv = {
    NODE_ENV: 'development', // production settings refuse the loopback upstream
    ALLOW_PRIVATE_UPSTREAMS: 'true',
    LOG_LEVEL: process.env.SOAK_LOG_LEVEL ?? 'info',
    DATABASE_URL: settings.DATABASE_URL,
    REDIS_URL: settings.REDIS_URL,
    REDIS_PREFIX: RUN_ID,
    TEMPORAL_ADDRESS: settings.TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: settings.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: RUN_ID,
  };
  const workers = await startWorkers(stackEnv, tmp, (child) => children.push(child));
  const rankerPid = workers.ranker.process.pid!;
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const edge = startChild('edge', await edgeEntry(), [], {
    stdout: join(tmp, 'edge.log'),
    nodeFlags: [...EDGE_NODE_FLAGS, ...(HEAP_SNAPSHOTS ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${tmp}`] : [])],
    env: {
      ...stackEnv,
      HOST: '127.0.0.1',
      PORT: String(port),
      // The load is paced; the limits stay out of its way (the limiter still runs on every call).
      RATE_LIMIT_KEY_MAX: '1000000000',
      RATE_LIMIT_ACCOUNT_MAX: '1000000000',
      RATE_LIMIT_PUBLIC_MAX: '1000000000',
    },
  });
  children.push(edge);
  await waitForHttp(`${origin}/api/v1/health`, 120_000, edge);
  const pid = edge.process.pid!;
  say(
    `edge pid ${pid} on ${origin}, run as ${edgeEntryNote()}${EDGE_NODE_FLAGS.length ? ` (node flags: ${EDGE_NODE_FLAGS.join(' ')})` : ''}; directory ranking process pid ${rankerPid} on ${workers.rankUrl}; logs in ${tmp}`,
  );

  // --- the load ------------------------------------------------------------------------------------
  const pool = new Pool(origin, { connections: 32, keepAliveTimeout: 30_000 });
  const counts = { proxy: 0, discover: 0, mcp: 0, sseOpened: 0, failed: 0 };
  const failures = new Map<string, number>();
  const fail = (what: string) => {
    counts.failed += 1;
    failures.set(what, (failures.get(what) ?? 0) + 1);
  };
  const end = Date.now() + MINUTES * 60_000;
  const call = async (what: keyof typeof counts, options: Parameters<Pool['request']>[0]) => {
    try {
      const res = await pool.request(options);
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) counts[what] += 1;
      else fail(`${what} ${res.statusCode}`);
    } catch (error) {
      fail(`${what} ${(error as Error).message}`);
    }
  };
  /** Calls `one` `rps` times a second (open loop, so a slow edge is not spared) until the end. */
  const paced = async (rps: number, one: () => Promise<void>) => {
    const inflight = new Set<Promise<void>>();
    const start = Date.now();
    for (let i = 0; Date.now() < end; i += 1) {
      const due = start + (i * 1000) / rps;
      if (due > Date.now()) await sleep(due - Date.now());
      const p = one().finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
  };
  const mcpBody = (i: number) => {
    const key = keys[i % keys.length]!;
    const tool =
      i % 3 === 0
        ? { name: 'discover_apis', arguments: { query: tasks[(i * 7) % tasks.length] } }
        : i % 3 === 1
          ? { name: 'get_balance', arguments: {} }
          : { name: 'call_api', arguments: { apiId, path: `/items?n=${i}` } };
    return {
      method: 'POST' as const,
      path: '/mcp',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: tool }),
    };
  };
  const sse = async (i: number) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), SSE_HOLD_MS);
    try {
      const res = await fetch(`${origin}/api/v1/activity/stream`, {
        headers: { 'x-api-key': keys[i % keys.length]!, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      if (res.status !== 200) {
        fail(`sse ${res.status}`);
        await res.arrayBuffer();
        return;
      }
      counts.sseOpened += 1;
      for await (const _chunk of res.body!) {
        // read until the hold time ends
      }
    } catch (error) {
      if (!controller.signal.aborted) fail(`sse ${(error as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  };
  let proxyI = 0;
  let discoverI = 0;
  let mcpI = 0;
  let sseI = 0;
  const load = Promise.all([
    paced(PROXY_RPS, () =>
      call('proxy', {
        method: 'GET',
        path: `/api/v1/proxy/${apiId}/items?x=${proxyI % 100}`,
        headers: { 'x-api-key': keys[proxyI++ % keys.length]! },
      }),
    ),
    paced(DISCOVER_RPS, () =>
      call('discover', { method: 'GET', path: `/api/v1/discover?q=${encodeURIComponent(tasks[discoverI++ % tasks.length]!)}` }),
    ),
    paced(MCP_RPS, () => call('mcp', mcpBody(mcpI++))),
    paced(1000 / SSE_OPEN_MS, () => sse(sseI++)),
  ]);

  // --- the samples ---------------------------------------------------------------------------------
  const samples: Array<{ minute: number; rssKb: number; anonKb: number; fileKb: number; threads: number; rankerKb: number }> = [];
  const label = (minute: number) => String(Number(minute.toFixed(2)));
  const sample = (minute: number) => {
    const m = memoryOf(pid);
    const r = memoryOf(rankerPid);
    samples.push({ minute, ...m, rankerKb: r.rssKb });
    say(
      `minute ${label(minute).padStart(3)}: RSS ${mb(m.rssKb)} (anonymous ${mb(m.anonKb)}, files ${mb(m.fileKb)}; ${m.threads} threads) · ` +
        `ranking process ${mb(r.rssKb)} (${r.threads} threads) · so far ${counts.proxy} proxy calls, ` +
        `${counts.discover} discoveries, ${counts.mcp} MCP tool calls, ${counts.sseOpened} SSE streams opened, ${counts.failed} failed`,
    );
  };
  const snapshot = async (label: string) => {
    const before = new Set(readdirSync(tmp));
    process.kill(pid, 'SIGUSR2');
    // The snapshot is written by the edge's main thread; wait until its file stops growing.
    for (let last = -1; ;) {
      await sleep(2000);
      const file = readdirSync(tmp).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
      if (!file) continue;
      const size = readFileSync(join(tmp, file)).length;
      if (size === last && size > 0) {
        say(`heap snapshot (${label}): ${join(tmp, file)}, ${(size / 1e6).toFixed(0)} MB`);
        return join(tmp, file);
      }
      last = size;
    }
  };
  sample(0);
  const started = Date.now();
  let firstSnapshot: string | null = null;
  for (let minute = 1; Date.now() < end; minute += 1) {
    await sleep(Math.max(0, started + minute * SAMPLE_MS - Date.now()));
    sample((minute * SAMPLE_MS) / 60_000);
    if (HEAP_SNAPSHOTS && minute === 1) firstSnapshot = await snapshot('after the first minute');
  }
  await load;
  for (const [who, of] of [
    ['edge', pid],
    ['ranking process', rankerPid],
  ] as const)
    say(
      `resident memory by kind (smaps), ${who}: ` +
        Object.entries(memoryByKind(of))
          .map(([kind, mbs]) => `${kind} ${mbs.toFixed(0)} MB`)
          .join(', '),
    );
  const lastSnapshot = HEAP_SNAPSHOTS ? await snapshot('at the end') : null;

  // --- the summary ---------------------------------------------------------------------------------
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const peak = samples.reduce((a, b) => (b.rssKb > a.rssKb ? b : a));
  const half = samples.find((s) => s.minute >= last.minute / 2) ?? first;
  const growth = (last.rssKb - half.rssKb) / half.rssKb;
  say('series (minute, RSS MB): ' + samples.map((s) => `${label(s.minute)} ${(s.rssKb / 1024).toFixed(0)}`).join(' · '));
  say(
    `RSS start ${mb(first.rssKb)}, peak ${mb(peak.rssKb)} (minute ${label(peak.minute)}), last ${mb(last.rssKb)}; ` +
      `growth over the last half (minute ${label(half.minute)} to ${label(last.minute)}): ${(growth * 100).toFixed(1)} %`,
  );
  const rankerPeak = samples.reduce((a, b) => (b.rankerKb > a.rankerKb ? b : a));
  const rankerGrowth = (last.rankerKb - half.rankerKb) / half.rankerKb;
  say('ranking process series (minute, RSS MB): ' + samples.map((s) => `${label(s.minute)} ${(s.rankerKb / 1024).toFixed(0)}`).join(' · '));
  say(
    `ranking process RSS start ${mb(first.rankerKb)}, peak ${mb(rankerPeak.rankerKb)} (minute ${label(rankerPeak.minute)}), last ${mb(last.rankerKb)}; ` +
      `growth over the last half: ${(rankerGrowth * 100).toFixed(1)} %`,
  );
  say(
    `targets (issue 34, the edge): at most 300 MB: ${peak.rssKb <= 300 * 1024 ? 'met' : 'missed'}; last half grows < 10 %: ${growth < 0.1 ? 'met' : 'missed'}`,
  );
  say(
    `load: ${counts.proxy} proxy calls, ${counts.discover} discoveries, ${counts.mcp} MCP tool calls, ${counts.sseOpened} SSE streams; ` +
      `${counts.failed} failed${failures.size ? ': ' + [...failures].map(([k, v]) => `${k} ×${v}`).join(', ') : ''}`,
  );
  await pool.close();
  if (firstSnapshot && lastSnapshot) await compareSnapshots(firstSnapshot, lastSnapshot);
} finally {
  await stopAll();
  await dropRedisPrefix(settings.REDIS_URL, RUN_ID).catch(() => 0);
  await sql.end({ timeout: 5 });
  // The soak's upstream leaves the bench database's directory with it (and any an interrupted soak left).
  await removeRunApis(settings.DATABASE_URL, 'soak-', `soak-${process.pid}`).catch((error: unknown) =>
    say(`could not remove the soak API: ${String(error)}`),
  );
}

/** Self size and count per constructor name of a V8 heap snapshot (read as a stream of its nodes). */
async function heapByConstructor(path: string): Promise<Map<string, { size: number; count: number }>> {
  const text = await new Promise<string>((resolve, reject) => {
    const parts: string[] = [];
    createReadStream(path, 'utf8')
      .on('data', (chunk) => parts.push(chunk as string))
      .on('end', () => resolve(parts.join('')))
      .on('error', reject);
  });
  const snapshot = JSON.parse(text) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = [fields.indexOf('type'), fields.indexOf('name'), fields.indexOf('self_size')];
  const byName = new Map<string, { size: number; count: number }>();
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    const type = types[snapshot.nodes[i + typeAt]!]!;
    const name = type === 'object' || type === 'closure' ? snapshot.strings[snapshot.nodes[i + nameAt]!]! : `(${type})`;
    const entry = byName.get(name) ?? { size: 0, count: 0 };
    entry.size += snapshot.nodes[i + sizeAt]!;
    entry.count += 1;
    byName.set(name, entry);
  }
  return byName;
}

async function compareSnapshots(a: string, b: string): Promise<void> {
  const [before, after] = [await heapByConstructor(a), await heapByConstructor(b)];
  const total = (m: Map<string, { size: number }>) => [...m.values()].reduce((s, e) => s + e.size, 0);
  say(`main-thread heap: ${(total(before) / 1e6).toFixed(1)} MB, then ${(total(after) / 1e6).toFixed(1)} MB`);
  const grown = [...after]
    .map(([name, e]) => ({ name, size: e.size - (before.get(name)?.size ?? 0), count: e.count - (before.get(name)?.count ?? 0) }))
    .sort((x, y) => y.size - x.size)
    .slice(0, 15);
  say('grew most between the snapshots (self size, count):');
  for (const g of grown) say(`  ${g.name.slice(0, 60).padEnd(60)} ${(g.size / 1e6).toFixed(2).padStart(8)} MB  ${String(g.count).padStart(8)}`);
}
