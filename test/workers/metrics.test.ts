import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { promtoolCheck } from '../helpers/metrics.js';
import { freePort } from '../helpers/ports.js';

// Each worker process serves Prometheus metrics on a port of its own; the text passes
// `promtool check metrics` (Debian's prometheus package, installed by the test script).

const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) {
    if (child.exitCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});

/** Starts a worker process and returns its metrics text once the endpoint answers. */
async function scrapeWorker(entry: string, env: Record<string, string>): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'warn', DATABASE_URL: testDatabaseUrl(), METRICS_PORT: String(port), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      const text = await res.text();
      if (res.status === 200) return text;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${entry} served no metrics: ${err.slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('the worker processes serve Prometheus metrics', () => {
  it('queue workers: queue depths by state, job outcomes, event-loop lag; promtool accepts the text', { timeout: 120_000 }, async () => {
    const text = await scrapeWorker('workers/queues/main.ts', { REDIS_PREFIX: uniqueId('qmetrics') });
    const check = promtoolCheck(text);
    expect(check.status, check.output).toBe(0);
    expect(text).toMatch(/platform_queue_jobs\{[^}]*queue="usage-events"[^}]*state="waiting"/);
    expect(text).toContain('platform_queue_job_failures_total');
    expect(text).toContain('platform_nodejs_eventloop_lag_seconds');
  });

  it(
    "Temporal worker: sessions running and waiting for a person, and the Temporal SDK's own metrics; promtool accepts the text",
    { timeout: 120_000 },
    async () => {
      const sdkPort = await freePort();
      const text = await scrapeWorker('workers/temporal/main.ts', {
        TEMPORAL_TASK_QUEUE: uniqueId('tmetrics-'),
        TEMPORAL_METRICS_ADDRESS: `127.0.0.1:${sdkPort}`,
        REDIS_PREFIX: uniqueId('tmetrics'),
      });
      const check = promtoolCheck(text);
      expect(check.status, check.output).toBe(0);
      expect(text).toMatch(/platform_cookbook_sessions_active\{[^}]*status="waiting_for_human"/);
      expect(text).toContain('platform_cookbook_sessions_oldest_wait_seconds');
      expect(text).toMatch(/^temporal_/m);
    },
  );
});
