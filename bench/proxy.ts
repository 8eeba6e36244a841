// The metered proxy's overhead: the same local upstream called directly and through the edge (auth,
// charge, header hygiene, streaming, usage hand-off), with a keep-alive client at fixed concurrency.
// After every run the ledger is checked: one charge per successful call, balance = opening - charges.
// `npm run bench -- proxy`
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { buildApp } from '../apps/edge/src/app.js';
import { edgeSettings } from '../apps/edge/src/config.js';
import { createAccount } from '../db/src/accounts.js';
import { runApiCli } from '../db/src/cli/api-cli.js';
import { createKey } from '../db/src/keys.js';
import { credit } from '../db/src/ledger.js';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { environmentLine, fmt, fmtSummary, log, percentile, summarize, writeSection } from './lib/report.js';

const scenario = 'proxy';
const CONCURRENCY = 32;
const OPENING_MICROS = 1_000_000_000_000n;
const duration = settings.BENCH_DURATION_SECONDS;
const BODY = Buffer.from(JSON.stringify({ ok: true, items: Array.from({ length: 20 }, (_, i) => ({ id: i, name: `item ${i}` })) }));

await prepareDatabase();
const upstream = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(BODY.length) });
  res.end(BODY);
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

// The bench process runs with NODE_ENV=production; this edge is a local one that must reach a
// loopback upstream, which production settings refuse, so it is built as a development edge.
const app = await buildApp(
  edgeSettings.parse({ ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'warn', ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: `bench-proxy-${process.pid}`, DATABASE_POOL_MAX: '20' }),
  { logger: false },
);
await app.listen({ host: '127.0.0.1', port: 0 });
const edgeUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const { sql } = app.deps;

const apiId = `bench-proxy-${process.pid}`;
await runApiCli(['add', '--id', apiId, '--name', 'Bench upstream', '--base-url', upstreamUrl, '--price', '0.000001'], { ...process.env, DATABASE_URL: settings.DATABASE_URL });
// One account per client: this measures the proxy, not the serialisation of charges on one hot
// account row (that is the charges scenario's "one hot account").
const accounts = await Promise.all(
  Array.from({ length: CONCURRENCY }, async (_, i) => {
    const account = await createAccount(sql, { email: `bench-proxy-${process.pid}-${i}-${Date.now()}@example.test`, passwordHash: null });
    if (!account) throw new Error('could not create a bench account');
    await credit(sql, { accountId: account.id, amountMicros: OPENING_MICROS, kind: 'adjustment' });
    const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: 'bench' });
    return { id: account.id, fullKey };
  }),
);
const accountIds = accounts.map((a) => a.id);

async function load(origin: string, path: string, headersOf: (client: number) => Record<string, string>): Promise<{ rps: number; p50: number; p99: number; ok: number }> {
  const pool = new Pool(origin, { connections: CONCURRENCY, keepAliveTimeout: 30_000 });
  const latencies: number[] = [];
  let ok = 0;
  const deadline = Date.now() + duration * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, client) => {
      const headers = headersOf(client);
      while (Date.now() < deadline) {
        const t = performance.now();
        const res = await pool.request({ method: 'GET', path, headers });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`unexpected ${res.statusCode}`);
        latencies.push(performance.now() - t);
        ok += 1;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  return { rps: ok / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), ok };
}

async function verifyLedger(expectedCharges: number): Promise<void> {
  const [row] = await sql<{ charges: bigint; balance: bigint; sum: bigint }[]>`
    select (select count(*) from ledger_entries where account_id = any(${accountIds}::uuid[]) and kind = 'charge') as charges,
           (select sum(balance_micros) from accounts where id = any(${accountIds}::uuid[]))::bigint as balance,
           (select sum(amount_micros) from ledger_entries where account_id = any(${accountIds}::uuid[]))::bigint as sum`;
  const opening = OPENING_MICROS * BigInt(accounts.length);
  if (!row || Number(row.charges) !== expectedCharges || row.balance !== row.sum || row.balance !== opening - BigInt(expectedCharges)) {
    throw new Error(`ledger check failed: ${row?.charges} charges for ${expectedCharges} calls, balance ${row?.balance}, ledger sum ${row?.sum}`);
  }
}

const direct: Array<{ rps: number; p50: number; p99: number }> = [];
const proxied: Array<{ rps: number; p50: number; p99: number }> = [];
let charged = 0;
for (let run = 1; run <= settings.BENCH_REPEATS; run += 1) {
  const d = await load(upstreamUrl, '/items?x=1', () => ({}));
  const p = await load(edgeUrl, `/api/v1/proxy/${apiId}/items?x=1`, (client) => ({ 'x-api-key': accounts[client]!.fullKey }));
  charged += p.ok;
  await verifyLedger(charged);
  direct.push(d);
  proxied.push(p);
  log(scenario, `run ${run}: direct ${fmt(d.rps, 0)} req/s (p50 ${fmt(d.p50)} ms), proxy ${fmt(p.rps, 0)} req/s (p50 ${fmt(p.p50)} ms, p99 ${fmt(p.p99)} ms)`);
}

const row = (label: string, rs: typeof direct) =>
  `| ${label} | ${fmtSummary(summarize(rs.map((r) => r.rps)), 0)} | ${fmtSummary(summarize(rs.map((r) => r.p50)))} | ${fmtSummary(summarize(rs.map((r) => r.p99)))} |`;
const added = summarize(proxied.map((p, i) => p.p50 - direct[i]!.p50));
writeSection(
  scenario,
  `## The metered proxy

${environmentLine()}

Command: \`npm run bench -- proxy\` (${CONCURRENCY} concurrent keep-alive clients, ${duration} s per run, ${settings.BENCH_REPEATS} runs; median (min–max)).
The same local upstream (a ${BODY.length}-byte JSON answer) called directly and through the edge's proxy, every proxied call
authenticated and charged, each client on its own account. After every run the ledger was checked: one charge per successful call and the balances equal to the ledger's sum.

| path | requests/s | p50 latency (ms) | p99 latency (ms) |
|---|---|---|---|
${row('direct to the upstream', direct)}
${row('through the proxy (charged)', proxied)}

Median latency the proxy adds: ${fmtSummary(added)} ms.`,
);

await app.close();
await new Promise<void>((resolve) => upstream.close(() => resolve()));
