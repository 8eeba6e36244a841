// Child processes for benchmarks: the system under test, its upstream and the load generator each run
// in their own process, pinned to a CPU with `taskset` when it is available, so that on a 2-core
// machine the process being measured gets a core of its own as far as possible.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const hasTaskset = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
/** CPU of the process under test, and CPU shared by the upstream and the load generator. */
export const CPU_EDGE = os.cpus().length >= 2 ? 1 : 0;
export const CPU_LOAD = 0;

export function placement(): string {
  if (!hasTaskset) return 'no taskset on this machine: processes float over every CPU';
  return `pinned with taskset: the proxy under test on CPU ${CPU_EDGE}; the upstream and the load generator on CPU ${CPU_LOAD}; Postgres, Redis and everything else unpinned`;
}

function pinned(cpu: number | undefined, command: string, args: string[]): [string, string[]] {
  return hasTaskset && cpu !== undefined ? ['taskset', ['-c', String(cpu), command, ...args]] : [command, args];
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface Child {
  name: string;
  process: ChildProcess;
  /** Sends SIGTERM and waits for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  cpu?: number;
  env?: NodeJS.ProcessEnv;
  /** Where stdout goes: a file path (logs), or 'inherit'. Default: discarded. */
  stdout?: string | 'inherit';
  /** Extra node flags (e.g. --cpu-prof). */
  nodeFlags?: string[];
}

/** Starts a TypeScript entry (through tsx), a JavaScript module (`.mjs`, with node) or any command as a child process. */
export function startChild(name: string, entry: string, args: string[], options: SpawnOptions = {}): Child {
  const isTs = entry.endsWith('.ts');
  const [command, argv] =
    isTs || entry.endsWith('.mjs')
      ? pinned(options.cpu, process.execPath, [...(options.nodeFlags ?? []), ...(isTs ? ['--import', 'tsx'] : []), entry, ...args])
      : pinned(options.cpu, entry, args);
  const out = options.stdout === 'inherit' ? 'inherit' : options.stdout ? openSync(options.stdout, 'a') : 'ignore';
  const child = spawn(command, argv, { cwd: ROOT, env: { ...process.env, ...options.env }, stdio: ['ignore', out, 'inherit'] });
  if (typeof out === 'number') closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    name,
    process: child,
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs a TypeScript entry to completion and parses the JSON its last stdout line holds. */
export async function runJson<T>(entry: string, input: unknown, options: { cpu?: number } = {}): Promise<T> {
  const [command, argv] = pinned(options.cpu, process.execPath, ['--import', 'tsx', entry, JSON.stringify(input)]);
  const child = spawn(command, argv, { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${entry} exited with ${code}: ${out.slice(-500)}`);
  const last = out.trim().split('\n').pop() ?? '';
  return JSON.parse(last) as T;
}

/** Polls a URL until it answers (any status below 500 unless `ok` says otherwise). */
export async function waitForHttp(url: string, timeoutMs = 60_000, child?: Child): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && (child.process.exitCode !== null || child.process.signalCode !== null)) throw new Error(`${child.name} exited before it answered`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}

/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux). */
export const CLOCK_TICKS = Number(process.env.BENCH_CLOCK_TICKS ?? 100);

/** What the benchmarks read of /proc/<pid>/stat; CPU times in µs (every thread of the process). */
export interface ProcStat {
  pid: number;
  /** The executable's name (`comm`, as `ps` shows it). */
  comm: string;
  ppid: number;
  /** Minor page faults so far. */
  minorFaults: number;
  /** User + system CPU so far. */
  cpuMicros: number;
  /** User + system CPU of its children that ended and were reaped. */
  reapedChildrenMicros: number;
}

/** A process's /proc/<pid>/stat; throws when it is gone. */
export function procStat(pid: number): ProcStat {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const close = stat.lastIndexOf(')');
  // The fields after "pid (comm) ", from the state (field 3 of stat(5)) on.
  const f = stat
    .slice(close + 2)
    .split(' ')
    .map(Number);
  const micros = (ticks: number) => (ticks * 1e6) / CLOCK_TICKS;
  return {
    pid,
    comm: stat.slice(stat.indexOf('(') + 1, close),
    ppid: f[1]!,
    minorFaults: f[7]!,
    cpuMicros: micros(f[11]! + f[12]!),
    reapedChildrenMicros: micros(f[13]! + f[14]!),
  };
}

/** Every process named `comm`, skipping those that end while they are read. */
export function procStatsOf(comm: string): ProcStat[] {
  const found: ProcStat[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = procStat(Number(entry));
      if (stat.comm === comm) found.push(stat);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return found;
}
