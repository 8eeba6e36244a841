import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import postgres from 'postgres';

// Throwaway Redis and Postgres instances of a chaos test's own, on free ports, in temporary
// directories: the test kills and restarts them at will. The shared services on 5432 and 6379 are
// never touched.

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitUntil(what: string, ready: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not come up within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface ChaosService {
  url: string;
  /** Kills the server the way a crash would (SIGKILL / immediate shutdown), without cleanup. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves when it answers. */
  start(): Promise<void>;
  /** Stops it and deletes its data. */
  destroy(): Promise<void>;
}

/** redis-server with an append-only file (appendfsync everysec), as production Redis keeps queues. */
export async function startChaosRedis(): Promise<ChaosService> {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-redis-'));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const ping = async () => {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } finally {
      client.disconnect();
    }
  };
  const service: ChaosService = {
    url,
    async start() {
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''],
        { stdio: 'ignore' },
      );
      await waitUntil(`redis on ${port}`, ping);
    },
    async kill() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
    async destroy() {
      await service.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await service.start();
  return service;
}

function postgresBin(name: string): string {
  const root = '/usr/lib/postgresql';
  const version = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  return version ? join(root, version, 'bin', name) : name;
}

/** Runs a Postgres server binary as the postgres user when we are root (initdb refuses root). */
function asPostgres(command: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [file, argv] = root ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  execFileSync(file, argv, { stdio: 'ignore' });
}

/** A Postgres cluster of its own (initdb into a temporary directory), trust auth, fsync off. */
export async function startChaosPostgres(): Promise<ChaosService> {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-pg-'));
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const port = await freePort();
  asPostgres(postgresBin('initdb'), ['-D', dir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const service: ChaosService = {
    url,
    async start() {
      asPostgres(postgresBin('pg_ctl'), ['-D', dir, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start']);
      await waitUntil(`postgres on ${port}`, async () => {
        const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
        try {
          await sql`select 1`;
          return true;
        } finally {
          await sql.end({ timeout: 1 });
        }
      });
    },
    async kill() {
      // An immediate shutdown: every backend is killed at once, no checkpoint; the next start recovers from WAL.
      try {
        asPostgres(postgresBin('pg_ctl'), ['-D', dir, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // Already down.
      }
    },
    async destroy() {
      await service.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await service.start();
  return service;
}
