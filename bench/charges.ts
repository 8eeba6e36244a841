// Charges in Postgres: the platform's charging from Node beside pgbench running the same conditional
// debit + ledger insert, for one hot account and for many accounts. The platform is measured twice:
// the single statement (charge()) and the edge's group commit (ChargeBatcher over chargeBatch()), both
// with the same number of concurrent callers as pgbench's clients, each waiting for its own charge.
// After every run the ledger is checked: each account's balance equals its opening balance minus its
// charges, no charge lost or doubled. `npm run bench -- charges`
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ChargeBatcher } from '#core/billing';
import { edgeSettings } from '#edge/config';
import { charge } from '#db/ledger';
import { createSql, type Sql } from '#db/sql';
import { profileWhile } from './lib/cpu-profile.js';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { environmentLine, fmt, fmtSummary, log, summarize, writeSection } from './lib/report.js';

const scenario = 'charges';
const CLIENTS = 16;
const OPENING_MICROS = 1_000_000_000_000n; // never the limit: this measures throughput, not refusals
const MANY = 1000;
const duration = settings.BENCH_DURATION_SECONDS;

// Deterministic ids so pgbench (integers only) and Node charge the same accounts.
const accountId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

await prepareDatabase();
const sql = createSql(settings.DATABASE_URL, { max: CLIENTS, appName: 'bench-charges' });

async function resetAccounts(count: number): Promise<void> {
  await sql`delete from accounts where id::text like '00000000-0000-4000-8000-%'`;
  await sql`
    insert into accounts (id, email, balance_micros)
    select ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid, 'bench-' || n || '@example.test', ${OPENING_MICROS}
      from generate_series(1, ${count}) n`;
}

/** Every account's balance equals its opening balance plus its ledger; the ledger has exactly `expected` charges. */
async function verifyLedger(db: Sql, expected: number): Promise<void> {
  const [row] = await db<{ charges: bigint; mismatched: bigint }[]>`
    select (select count(*) from ledger_entries l where l.account_id::text like '00000000-0000-4000-8000-%' and kind = 'charge') as charges,
           (select count(*) from accounts a
             where a.id::text like '00000000-0000-4000-8000-%'
               and a.balance_micros <> ${OPENING_MICROS} + coalesce((select sum(amount_micros) from ledger_entries l where l.account_id = a.id), 0)) as mismatched`;
  if (!row || Number(row.charges) !== expected || row.mismatched !== 0n) {
    throw new Error(`ledger check failed: ${row?.charges} charges recorded for ${expected} reported, ${row?.mismatched} accounts off`);
  }
}

// The edge's own defaults (CHARGE_BATCH_MAX, CHARGE_BATCH_CONCURRENCY).
const edgeDefaults = edgeSettings.parse({});
const batcher = new ChargeBatcher(sql, {
  maxBatch: edgeDefaults.CHARGE_BATCH_MAX,
  maxInFlight: edgeDefaults.CHARGE_BATCH_CONCURRENCY,
  log: pino({ level: 'warn' }),
});

async function runPlatform(accounts: number, mode: 'statement' | 'batched'): Promise<number> {
  await resetAccounts(accounts);
  const chargeOne =
    mode === 'batched' ? (req: Parameters<typeof charge>[1]) => batcher.charge(req) : (req: Parameters<typeof charge>[1]) => charge(sql, req);
  let done = 0;
  const deadline = Date.now() + duration * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < deadline) {
        const n = 1 + Math.floor(Math.random() * accounts);
        const result = await chargeOne({ accountId: accountId(n), costMicros: 1n, item: 'bench' });
        if (!result.ok) throw new Error(`charge refused: ${result.reason}`);
        done += 1;
      }
    }),
  );
  const tps = done / ((performance.now() - start) / 1000);
  await verifyLedger(sql, done);
  return tps;
}

const scriptDir = mkdtempSync(join(tmpdir(), 'bench-charges-'));
const script = join(scriptDir, 'charge.sql');
// The same single statement charge() sends: conditional debit and ledger insert.
writeFileSync(
  script,
  `\\set n random(1, :accounts)
with debit as (
  update accounts set balance_micros = balance_micros - 1
   where id = ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid and balance_micros >= 1
  returning balance_micros
)
insert into ledger_entries (account_id, kind, amount_micros, balance_after_micros, key_id, api_id, item, description)
select ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid, 'charge', -1, debit.balance_micros, null, null, 'bench', null from debit
returning id, balance_after_micros;
`,
);

async function runPgbench(accounts: number): Promise<number> {
  await resetAccounts(accounts);
  const url = new URL(settings.DATABASE_URL);
  const out = execFileSync(
    'pgbench',
    [
      '-n',
      '-M',
      'prepared',
      '-c',
      String(CLIENTS),
      '-j',
      '2',
      '-T',
      String(duration),
      '-D',
      `accounts=${accounts}`,
      '-f',
      script,
      '-h',
      url.hostname,
      '-p',
      url.port || '5432',
      '-U',
      decodeURIComponent(url.username || 'postgres'),
      url.pathname.slice(1),
    ],
    { encoding: 'utf8' },
  );
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1];
  const processed = /number of transactions actually processed: (\d+)/.exec(out)?.[1];
  if (!tps || !processed) throw new Error(`could not read pgbench output:\n${out}`);
  await verifyLedger(sql, Number(processed));
  return Number(tps);
}

interface Runs {
  pgbench: number[];
  platform: number[];
  batched: number[];
}
const results: Record<string, Runs> = { hot: { pgbench: [], platform: [], batched: [] }, many: { pgbench: [], platform: [], batched: [] } };
for (let run = 1; run <= settings.BENCH_REPEATS; run += 1) {
  for (const [shape, accounts] of [
    ['hot', 1],
    ['many', MANY],
  ] as const) {
    const baseline = await runPgbench(accounts);
    const platform = await runPlatform(accounts, 'statement');
    const batched = await runPlatform(accounts, 'batched');
    results[shape]!.pgbench.push(baseline);
    results[shape]!.platform.push(platform);
    results[shape]!.batched.push(batched);
    log(
      scenario,
      `run ${run} ${shape}: pgbench ${fmt(baseline, 0)} charges/s, charge() ${fmt(platform, 0)} (${fmt(platform / baseline)}), group commit ${fmt(batched, 0)} (${fmt(batched / baseline)})`,
    );
  }
}
// Where the time goes for one hot account: this process under the V8 profiler for one more run.
const hotProfile = await profileWhile(() => runPlatform(1, 'batched'));
const hotBusyShare = hotProfile.summary.busyMs / Math.max(1, hotProfile.summary.busyMs + hotProfile.summary.idleMs);
log(scenario, `profiled hot run: ${fmt(hotProfile.result, 0)} charges/s, Node busy ${fmt(hotBusyShare * 100, 0)} % of the run`);
await sql`delete from accounts where id::text like '00000000-0000-4000-8000-%'`;

const rows = (['hot', 'many'] as const).map((shape) => {
  const r = results[shape]!;
  const ratio = summarize(r.platform.map((p, i) => p / r.pgbench[i]!));
  const batchedRatio = summarize(r.batched.map((p, i) => p / r.pgbench[i]!));
  const label = shape === 'hot' ? 'one hot account' : `${MANY.toLocaleString('en')} accounts`;
  const met = (x: number) => (x >= 0.7 ? 'yes' : 'no');
  return `| ${label} | ${fmtSummary(summarize(r.pgbench), 0)} | ${fmtSummary(summarize(r.platform), 0)} | ${fmtSummary(ratio)} (${met(ratio.median)}) | ${fmtSummary(summarize(r.batched), 0)} | ${fmtSummary(batchedRatio)} (${met(batchedRatio.median)}) |`;
});
writeSection(
  scenario,
  `## Charges in Postgres

${environmentLine()}

Command: \`npm run bench -- charges\` (${CLIENTS} clients, ${duration} s per run, ${settings.BENCH_REPEATS} runs; charges per second, median (min–max)).
Baseline: \`pgbench -n -M prepared -c ${CLIENTS} -j 2 -T ${duration}\` running the same conditional debit + ledger insert.
After every run the ledger was checked: every account's balance equals its opening balance plus its
ledger entries, and the number of charge rows equals the number of charges reported (none lost or doubled).

| accounts | pgbench | charge() via postgres.js | ratio (≥ 0.7?) | group commit, as the edge charges | ratio (≥ 0.7?) |
|---|---|---|---|---|---|
${rows.join('\n')}

Group commit: ${CLIENTS} callers each await their own charge through the edge's \`ChargeBatcher\` (\`CHARGE_BATCH_MAX=${edgeDefaults.CHARGE_BATCH_MAX}\`,
\`CHARGE_BATCH_CONCURRENCY=${edgeDefaults.CHARGE_BATCH_CONCURRENCY}\`): the charges waiting together leave as one statement (\`chargeBatch()\`), one account once
each, so one hot account gets no batching (one charge per statement) and many accounts share commits
(${fmt(batcher.stats.charges / Math.max(1, batcher.stats.statements))} charges per statement on average over every run here).

Where the time goes with one hot account: one more run of the edge's path (${fmt(hotProfile.result, 0)} charges/s) with this process under
the V8 profiler: it was busy ${fmt(hotBusyShare * 100, 0)} % of the run (${fmt((hotProfile.summary.busyMs / Math.max(1, hotProfile.result * duration)) * 1000, 1)} µs of CPU per charge) and idle the rest, waiting for
Postgres: every charge of the account takes the row lock the previous one holds until its commit, so charges of one account
are as fast as one commit after another, in pgbench as here. Run to run the two move together with the disk's commit time.`,
);
await sql.end();
