import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// postgres@3.4.9 defers small writes with setImmediate; when the backend dies first, the deferred
// write used to hit a null socket and throw outside any promise, ending the process (porsager/postgres
// #1154, #1208). patches/postgres+3.4.9.patch guards it. The driver runs in a child process here so
// that a regression shows as that process's exit, not as an error thrown into the test runner.
const script = `
import postgres from 'postgres';
const url = process.env.DATABASE_URL;
const sql = postgres(url, { max: 2, onnotice: () => {} });
const killer = postgres(url, { max: 1 });
let pid = null;
// The outcome is attached at once: the transaction may fail before the killer's own query returns.
const outcome = sql.begin(async (t) => {
  const [row] = await t\`select pg_backend_pid() as pid\`;
  pid = row.pid;
  await t\`select pg_sleep(5)\`;
}).then(() => 'committed', (err) => err.code ?? String(err));
while (pid === null) await new Promise((r) => setTimeout(r, 20));
await killer\`select pg_terminate_backend(\${pid})\`;
const code = await outcome;
await new Promise((r) => setTimeout(r, 200));
const [again] = await sql\`select 1 as one\`;
console.log(JSON.stringify({ code, again: again.one }));
await Promise.all([sql.end({ timeout: 1 }), killer.end({ timeout: 1 })]);
`;

describe('the Postgres driver', () => {
  it('survives a backend killed under an open transaction, and the pool serves the next query', () => {
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: process.cwd(),
      env: { ...process.env },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.stderr).not.toMatch(/TypeError/);
    expect(run.status, run.stderr).toBe(0);
    const outcome = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { code: string; again: number };
    expect(outcome.code).toMatch(/^(57P01|CONNECTION_CLOSED)$/);
    expect(outcome.again).toBe(1);
  });
});
