import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEdge } from '#scripts/build-edge';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { freePort } from '../helpers/ports.js';
import { DASHBOARD_INDEX } from '../helpers/dashboard-build.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// The edge as production runs it: the bundle of `npm run build:edge`, started with plain node (built
// here into a folder of this test's own, inside the repository so its packages resolve as in dist/edge).
describe('the edge process (apps/edge/src/server.ts, from its bundle)', () => {
  let outdir: string;
  let entry: string;
  beforeAll(async () => {
    mkdirSync(join(ROOT, 'dist'), { recursive: true });
    outdir = mkdtempSync(join(ROOT, 'dist/test-edge-'));
    entry = (await buildEdge(outdir)).entry;
  });
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('writes buffered log lines within about a second when quiet, and every one of them when it shuts down; finds the files beside its sources', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [entry], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        // Far more than these few lines: only the periodic flush or the shutdown writes them.
        LOG_BUFFER_BYTES: '16000',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: testDatabaseUrl(),
        REDIS_PREFIX: uniqueId('srv'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const requestIds: string[] = [];
      const deadline = Date.now() + 60_000;
      for (;;) {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`, { headers: { 'x-request-id': uniqueId('req') } });
          await res.arrayBuffer();
          requestIds.push(res.headers.get('x-request-id') ?? '');
          break;
        } catch (error) {
          if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the edge did not answer: ${String(error)} ${err}`);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      // Files its modules find beside their sources: the dashboard's build, served at the root.
      const page = await fetch(`http://127.0.0.1:${port}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toBe(readFileSync(DASHBOARD_INDEX, 'utf8'));
      // A quiet edge: the periodic flush writes the line without further traffic.
      const quietUntil = Date.now() + 5_000;
      while (!out.includes(requestIds[0]!) && Date.now() < quietUntil) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(out).toContain(requestIds[0]);
      for (let i = 0; i < 3; i += 1) {
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/no-such-route`, { headers: { 'x-request-id': uniqueId('req') } });
        await res.arrayBuffer();
        requestIds.push(res.headers.get('x-request-id') ?? '');
      }
      // Straight after the last answers: these lines are still in the buffer.
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      const lines = out
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { msg: string; reqId?: string });
      for (const id of requestIds)
        expect(
          lines.some((l) => l.reqId === id && l.msg === 'request completed'),
          id,
        ).toBe(true);
      expect(lines.some((l) => /shutting down/.test(l.msg))).toBe(true);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 90_000);
});
