// Key verification: the edge's cached verification beside a bare SHA-256 + Map look-up, and how long
// a revocation takes to reach a second edge instance. `npm run bench -- keys`
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { KeyVerifier, publishKeyChange } from '#core/identity';
import { createAccount } from '#db/accounts';
import { PlatformError } from '#core/platform';
import { createKey } from '#db/keys';
import { createRedis } from '#core/platform';
import { createSql } from '#db/sql';
import { benchSettings as settings, prepareDatabase } from './lib/env.js';
import { environmentLine, fmt, fmtSummary, log, summarize, writeSection } from './lib/report.js';

const ITERATIONS = 200_000;
const scenario = 'keys';

await prepareDatabase();
const sql = createSql(settings.DATABASE_URL, { max: 4, appName: 'bench-keys' });
const redis = createRedis(settings.REDIS_URL);
const account = await createAccount(sql, { email: `bench-keys-${Date.now()}@example.test`, ownerPersonId: null });
if (!account) throw new Error('could not create the bench account');

const options = { redisUrl: settings.REDIS_URL, redisPrefix: `bench-${process.pid}`, ttlMs: 60_000 };
const instanceA = new KeyVerifier(sql, options);
const instanceB = new KeyVerifier(sql, options);
await Promise.all([instanceA.start(), instanceB.start()]);
await new Promise((resolve) => setTimeout(resolve, 300)); // let both subscriptions go live

async function timeBaseline(fullKey: string): Promise<number> {
  const map = new Map<string, { id: string }>([[createHash('sha256').update(fullKey).digest('hex'), { id: 'k' }]]);
  let found = 0;
  const start = performance.now();
  for (let i = 0; i < ITERATIONS; i += 1) {
    if (map.get(createHash('sha256').update(fullKey).digest('hex'))) found += 1;
  }
  const elapsed = performance.now() - start;
  if (found !== ITERATIONS) throw new Error('baseline lost a look-up');
  return (elapsed * 1000) / ITERATIONS;
}

async function timeCached(fullKey: string): Promise<number> {
  await instanceA.verify(fullKey); // warm
  const start = performance.now();
  for (let i = 0; i < ITERATIONS; i += 1) await instanceA.verify(fullKey);
  return ((performance.now() - start) * 1000) / ITERATIONS;
}

async function timeRevocation(): Promise<number> {
  const { key, fullKey } = await createKey(sql, { accountId: account!.id, kind: 'api', name: 'bench revocation' });
  await instanceB.verify(fullKey); // cached on the second instance
  const start = performance.now();
  await sql`update api_keys set status = 'revoked', revoked_at = now() where id = ${key.id}`;
  await publishKeyChange(redis, options.redisPrefix, key.id);
  for (;;) {
    try {
      await instanceB.verify(fullKey);
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'key_revoked') return performance.now() - start;
      throw error;
    }
    if (performance.now() - start > 5_000) throw new Error('revocation not seen within 5 s');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const baseline: number[] = [];
const cached: number[] = [];
const revocation: number[] = [];
for (let run = 1; run <= settings.BENCH_REPEATS; run += 1) {
  const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: `bench ${run}` });
  baseline.push(await timeBaseline(fullKey));
  cached.push(await timeCached(fullKey));
  revocation.push(await timeRevocation());
  log(
    scenario,
    `run ${run}: baseline ${fmt(baseline.at(-1)!)} µs, cached verify ${fmt(cached.at(-1)!)} µs, revocation seen in ${fmt(revocation.at(-1)!)} ms`,
  );
}

const b = summarize(baseline);
const c = summarize(cached);
const r = summarize(revocation);
writeSection(
  scenario,
  `## Key verification

${environmentLine()}

Command: \`npm run bench -- keys\` (${ITERATIONS.toLocaleString('en')} verifications per run, ${settings.BENCH_REPEATS} runs; median (min–max)).

| measurement | baseline: SHA-256 + Map look-up | platform | target | met |
|---|---|---|---|---|
| cached verification, µs per call | ${fmtSummary(b)} | ${fmtSummary(c)} | under 50 µs | ${c.median < 50 ? 'yes' : 'no'} |
| revocation seen by a second instance, ms | — | ${fmtSummary(r)} | under 1,000 ms | ${r.max < 1000 ? 'yes' : 'no'} |

The platform's path adds the key's shape and CRC-32 check, the status and expiry checks and an
\`await\` to the baseline's hash and look-up.`,
);

await Promise.all([instanceA.stop(), instanceB.stop()]);
await sql.end();
redis.disconnect();
