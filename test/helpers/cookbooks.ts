import { request as httpRequest, type IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import type { Db, Sql } from '#db/sql';
import { createActivities } from '#workers/temporal/activities';
import { uniqueId } from './settings.js';

export const workflowsPath = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

let runtimeQuieted = false;
/** Temporal's Rust core logs to stderr by default; tests only want its warnings. */
export function quietTemporalRuntime(): void {
  if (runtimeQuieted) return;
  runtimeQuieted = true;
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } } });
  } catch {
    // Already installed by an earlier Worker in this process.
  }
}

let bundle: Promise<WorkflowBundleWithSourceMap> | null = null;
/** The workflow bundle, built once per test file. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath, logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
  return bundle;
}

export interface RunningWorker {
  worker: Worker;
  /** Stops polling, lets activities in flight finish, and waits for the worker to stop. */
  stop(): Promise<void>;
}

/** An in-process Temporal worker on the dev server, for one test file's own task queue. */
export async function startWorker(options: {
  taskQueue: string;
  sql: Sql;
  redis: Redis;
  redisPrefix: string;
  address?: string;
  /** Sticky workflow cache size; tests keep 0 (every task replays), benchmarks set a production-like cache. */
  maxCachedWorkflows?: number;
}): Promise<RunningWorker> {
  quietTemporalRuntime();
  const connection = await NativeConnection.connect({ address: options.address ?? process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const worker = await Worker.create({
    connection,
    namespace: 'default',
    taskQueue: options.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities({ sql: options.sql, redis: options.redis, redisPrefix: options.redisPrefix }),
    // Sticky caching would hide a restart's replay; without it every task replays from history.
    maxCachedWorkflows: options.maxCachedWorkflows ?? 0,
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

/** Terminates the sessions a test file left running on its own task queue, so the shared dev server stays tidy. */
export async function terminateRunningSessions(client: Client, taskQueue: string): Promise<void> {
  const ids: string[] = [];
  for await (const execution of client.workflow.list({ query: `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running"` })) ids.push(execution.workflowId);
  await Promise.allSettled(ids.map((id) => client.workflow.getHandle(id).terminate('test finished')));
}

/** A directory API row of the test's own, for filling slots. */
export async function createTestApi(db: Db, label = 'api'): Promise<string> {
  const id = uniqueId(`${label}-`).toLowerCase();
  await db`insert into apis (id, name, provider, base_url, source, categories, description)
           values (${id}, ${`Test ${label}`}, 'example.test', 'http://127.0.0.1:9/', 'operator', ${['testing']}, 'An API made by a test')`;
  return id;
}

export interface SseEvent {
  id: string | null;
  event: string;
  data: unknown;
}

export interface SseClient {
  response: IncomingMessage;
  events: SseEvent[];
  comments: string[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  /** Resolves once `count` events have arrived (or rejects after the timeout). */
  waitFor(count: number, timeoutMs?: number): Promise<SseEvent[]>;
  close(): void;
}

/** Opens an SSE stream with a real HTTP connection and parses its frames as they arrive. */
export function openSse(baseUrl: string, path: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, baseUrl), { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      const waiters: { count: number; resolve: (events: SseEvent[]) => void }[] = [];
      let buffer = '';
      const notify = () => {
        for (const waiter of [...waiters]) {
          if (events.length >= waiter.count) {
            waiters.splice(waiters.indexOf(waiter), 1);
            waiter.resolve(events.slice());
          }
        }
      };
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | null = null;
          let event = 'message';
          const data: string[] = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) events.push({ id, event, data: JSON.parse(data.join('\n')) });
        }
        notify();
      });
      const ended = new Promise<void>((done) => {
        response.on('end', () => done());
        response.on('close', () => done());
      });
      resolve({
        response,
        events,
        comments,
        ended,
        waitFor(count, timeoutMs = 15_000) {
          if (events.length >= count) return Promise.resolve(events.slice());
          return new Promise((done, fail) => {
            const timer = setTimeout(() => fail(new Error(`expected ${count} events, got ${events.length}: ${events.map((e) => e.event).join(', ')}`)), timeoutMs);
            waiters.push({
              count,
              resolve: (seen) => {
                clearTimeout(timer);
                done(seen);
              },
            });
          });
        },
        close() {
          req.destroy();
        },
      });
    });
    req.on('error', reject);
    req.end();
  });
}
