// `npm run bench:search`: p95 latency of search (GET /apis?q=) and discovery (GET /discover?q=) at
// 50 concurrent callers over the full catalog in DATABASE_URL (import it first), beside a bare
// Postgres full-text query at the same concurrency. Not part of `npm test`.
import autocannon from 'autocannon';
import { buildApp } from '../apps/edge/src/app.js';
import { loadEdgeSettings } from '../apps/edge/src/config.js';
import { createSql } from '../db/src/sql.js';

const CONNECTIONS = 50;
const DURATION = Number(process.env.BENCH_SECONDS ?? 15);
const searches = ['weather', 'sms', 'twillio', 'geocoding address', 'payments', 'translate', 'email marketing', 'stock quotes', 'pdf', 'music'];
const tasks = [
  'send a text message to a phone',
  'turn an address into coordinates',
  'weather forecast for my city tomorrow',
  'translate a sentence from english to french',
  'charge a customer credit card',
  'add an event to my calendar',
  'shorten a long url',
  'transcribe an audio recording to text',
  'track a parcel shipment',
  'find recipes and nutrition facts',
];

// 50 callers from one address: the per-address public rate limit is lifted out of the way of what is measured.
const settings = loadEdgeSettings({ ...process.env, LOG_LEVEL: 'warn', DATABASE_POOL_MAX: process.env.DATABASE_POOL_MAX ?? '20', RATE_LIMIT_PUBLIC_MAX: '1000000000' });
let port = 0;

function percentiles(latencies: number[]) {
  latencies.sort((a, b) => a - b);
  const at = (p: number) => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? NaN) * 10) / 10;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}

/** Runs autocannon and computes exact percentiles from every response time it reports. */
async function run(name: string, paths: string[], connections = CONNECTIONS) {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url: `http://127.0.0.1:${port}`, connections, duration: DURATION, requests: paths.map((path) => ({ method: 'GET' as const, path })) },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on('response', (_client, _status, _bytes, responseTime) => latencies.push(responseTime));
  });
  return { name, requests: result.requests.total, rps: Math.round(result.requests.average), ...percentiles(latencies), non2xx: result.non2xx + result.errors };
}

/** The baseline: the same 50 callers running a bare full-text query directly against Postgres. */
async function baseline() {
  const sql = createSql(settings.DATABASE_URL, { max: CONNECTIONS, appName: 'bench-baseline' });
  const latencies: number[] = [];
  const end = Date.now() + DURATION * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, worker) => {
      let i = worker;
      while (Date.now() < end) {
        const q = searches[i++ % searches.length]!;
        const t = performance.now();
        await sql`select id, name from apis where search_vector @@ websearch_to_tsquery('english', ${q})
                  order by ts_rank(search_vector, websearch_to_tsquery('english', ${q})) desc limit 50`;
        latencies.push(performance.now() - t);
      }
    }),
  );
  await sql.end();
  return { name: 'bare Postgres FTS (same callers, no HTTP)', requests: latencies.length, rps: Math.round(latencies.length / DURATION), ...percentiles(latencies), non2xx: 0 };
}

const rows = [];
let n = 0;
// Cold: the shared Redis cache off, every request ranks in Postgres. Warm: the cache on (30 s).
for (const cacheSeconds of ['0', '30']) {
  const app = await buildApp({ ...settings, DIRECTORY_CACHE_SECONDS: Number(cacheSeconds) }, { logger: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  n = (await app.deps.sql<{ n: number }[]>`select count(*)::int as n from apis`)[0]?.n ?? 0;
  const mode = cacheSeconds === '0' ? 'no cache' : 'Redis cache';
  if (cacheSeconds === '0') {
    // One caller: the cost of one ranking without queueing behind 49 others.
    rows.push(await run('GET /api/v1/apis?q= (no cache, 1 caller)', searches.map((q) => `/api/v1/apis?q=${encodeURIComponent(q)}`), 1));
    rows.push(await run('GET /api/v1/discover?q= (no cache, 1 caller)', tasks.map((q) => `/api/v1/discover?q=${encodeURIComponent(q)}`), 1));
  }
  rows.push(await run(`GET /api/v1/apis?q= (${mode})`, searches.map((q) => `/api/v1/apis?q=${encodeURIComponent(q)}`)));
  rows.push(await run(`GET /api/v1/discover?q= (${mode})`, tasks.map((q) => `/api/v1/discover?q=${encodeURIComponent(q)}`)));
  await app.close();
}
rows.push(await baseline());

const loadAtEnd = (await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ');
console.log(`catalog: ${n} APIs; ${CONNECTIONS} concurrent callers unless noted; ${DURATION} s each; load average ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`);
console.log('| what | requests | req/s | p50 ms | p95 ms | p99 ms | errors |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.name} | ${r.requests} | ${r.rps} | ${r.p50} | ${r.p95} | ${r.p99} | ${r.non2xx} |`);

if (rows.some((r) => r.non2xx > 0)) throw new Error('some answers were errors (see the errors column): not writing the table');
// The measured table also goes into docs/BENCHMARKS.md (its own marked section), with the target's verdict.
const { environmentLine, writeSection } = await import('./lib/report.js');
const verdictOf = (name: string, p95: number) => (name.includes('50 callers') || !name.includes('caller') ? (p95 < 20 ? 'met' : 'missed') : '–');
writeSection(
  'search',
  `## Search and discovery: measured table

${environmentLine()}

Command: \`flock /work/wt/bench.lock npm run bench -- search\` (\`BENCH_SECONDS=${DURATION}\`); load average ${loadAtEnd} (1 / 5 / 15 min) when it finished.
Catalog: ${n} APIs; ${CONNECTIONS} concurrent callers unless noted. Target (issue 8): p95 under 20 ms at 50 concurrent callers.

| what | requests | req/s | p50 ms | p95 ms | p99 ms | errors | p95 < 20 ms |
|---|---|---|---|---|---|---|---|
${rows.map((r) => `| ${r.name} | ${r.requests} | ${r.rps} | ${r.p50} | ${r.p95} | ${r.p99} | ${r.non2xx} | ${verdictOf(r.name, r.p95)} |`).join('\n')}`,
);
