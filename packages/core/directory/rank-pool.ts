/**
 * Search and discovery off the edge's event loop: a pool of worker threads, each holding its own
 * directory index and API access facts (loaded at start, kept current by LISTEN; the caller's own
 * holdings come with each job) and answering with the JSON bytes of
 * the answer (answers.ts), which move back to the edge's thread without a copy. The event loop keeps
 * HTTP, the rate limiter and writing the answer; ranking and rendering run beside it on other cores.
 *
 * The workers start with the first job (as the in-process index loads with the first search), or
 * at start(). A job goes to the worker with the fewest jobs in flight. A worker that dies fails its
 * jobs in flight (500) and is replaced. Each worker costs its own copy of the index, of WordNet and of
 * discovery's embedding model (about 280 MB of memory with its modules, plus 80 MB for the model) and
 * two database connections (one for LISTEN).
 */
import { Worker } from 'node:worker_threads';
import { PlatformError, type ErrorCode } from '#core/platform';
import { discoverAnswer, searchAnswer, type DiscoverRequest, type SearchRequest } from './answers.js';
import type { CallabilityCatalog } from './callability.js';
import type { LiveDirectoryIndex } from './index-loader.js';

/** Where search and discovery answers come from: the edge's own event loop, or a RankPool. */
export interface DirectoryRanking {
  search(request: SearchRequest): Promise<Buffer>;
  discover(request: DiscoverRequest): Promise<Buffer>;
}

/** Ranking on the caller's event loop, from its own index and access facts (DIRECTORY_RANK_WORKERS=0). */
export function inProcessRanking(index: LiveDirectoryIndex, catalog: CallabilityCatalog): DirectoryRanking {
  return {
    search: (request) => searchAnswer(index, catalog, request),
    discover: (request) => discoverAnswer(index, catalog, request),
  };
}

export interface RankWorkerData {
  databaseUrl: string;
  /** Discovery's embedding model (semantic.ts), null for word ranking only. */
  modelDir: string | null;
  /** Task vectors each worker keeps (DISCOVERY_TASK_VECTORS). */
  rememberTasks: number | undefined;
  /** How often each worker reads discovery's feedback signal (DISCOVERY_FEEDBACK_REFRESH_SECONDS, in ms); 0 for none. */
  feedbackRefreshMs: number | undefined;
}

export type RankJob =
  { op: 'search'; id: number; request: SearchRequest } | { op: 'discover'; id: number; request: DiscoverRequest } | { op: 'close' };

export type RankReply =
  | { id: number; body: Uint8Array }
  | { id: number; error: { code: ErrorCode; message: string; hint: string | undefined; details: Record<string, unknown> | undefined } }
  | { id: number; failure: { message: string; code: string | undefined; stack: string | undefined } }
  | { ready: true }
  | { closed: true }
  | { log: string; error: string };

/** Where the pool reports worker trouble (a pino/Fastify logger fits). */
export interface RankPoolLog {
  warn(object: Record<string, unknown>, message: string): void;
}

interface Pending {
  resolve: (body: Buffer) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
}

const ENTRY = new URL('./rank-worker-entry.mjs', import.meta.url);
/** A worker that died is replaced at once, but not more often than this. */
const RESPAWN_MIN_INTERVAL_MS = 1_000;
const CLOSE_TIMEOUT_MS = 5_000;

/** An error of a worker's job as the edge would have thrown it in process: PlatformErrors as they were, others with their code (database trouble answers 503). */
function jobError(reply: Extract<RankReply, { failure: unknown }>['failure']): Error {
  const error = new Error(reply.message) as Error & { code?: string };
  if (reply.code !== undefined) error.code = reply.code;
  if (reply.stack !== undefined) error.stack = reply.stack;
  return error;
}

export class RankPool implements DirectoryRanking {
  private readonly slots: (Slot | null)[];
  private nextId = 1;
  private started = false;
  private closed = false;

  constructor(
    private readonly options: {
      size: number;
      databaseUrl: string;
      modelDir?: string | null;
      rememberTasks?: number;
      feedbackRefreshMs?: number;
      log?: RankPoolLog;
    },
  ) {
    this.slots = Array.from({ length: options.size }, () => null);
  }

  get size(): number {
    return this.slots.length;
  }

  search(request: SearchRequest): Promise<Buffer> {
    return this.run((id) => ({ op: 'search', id, request }));
  }

  discover(request: DiscoverRequest): Promise<Buffer> {
    return this.run((id) => ({ op: 'discover', id, request }));
  }

  /** Stops every worker (each closes its index and database connections first, within a few seconds). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (!slot) return;
        const done = new Promise<void>((resolve) => {
          slot.worker.once('exit', () => resolve());
          slot.worker.on('message', (reply: RankReply) => {
            if ('closed' in reply) resolve();
          });
        });
        slot.worker.postMessage({ op: 'close' } satisfies RankJob);
        const timer = setTimeout(() => void slot.worker.terminate(), CLOSE_TIMEOUT_MS);
        await done;
        clearTimeout(timer);
        await slot.worker.terminate();
      }),
    );
  }

  /** Starts the workers now rather than at the first job (each loads its index at start, a second or two). */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    for (let at = 0; at < this.slots.length; at++) this.spawn(at);
  }

  private run(job: (id: number) => RankJob): Promise<Buffer> {
    if (this.closed)
      return Promise.reject(new PlatformError('service_unavailable', 'The directory is shutting down', { hint: 'Retry in a moment.' }));
    this.start();
    let best: Slot | null = null;
    for (const slot of this.slots) if (slot && (!best || slot.pending.size < best.pending.size)) best = slot;
    if (!best)
      return Promise.reject(
        new PlatformError('service_unavailable', 'Directory ranking is restarting', { hint: 'Retry in a moment.', headers: { 'Retry-After': '1' } }),
      );
    const id = this.nextId++;
    const slot = best;
    return new Promise<Buffer>((resolve, reject) => {
      // A worker with jobs in flight keeps the process alive until they are answered.
      if (slot.pending.size === 0) slot.worker.ref();
      slot.pending.set(id, { resolve, reject });
      slot.worker.postMessage(job(id));
    });
  }

  private spawn(at: number): void {
    const startedAt = Date.now();
    const worker = new Worker(ENTRY, {
      workerData: {
        databaseUrl: this.options.databaseUrl,
        modelDir: this.options.modelDir ?? null,
        rememberTasks: this.options.rememberTasks,
        feedbackRefreshMs: this.options.feedbackRefreshMs,
      } satisfies RankWorkerData,
      execArgv: [],
      name: `directory-rank-${at}`,
    });
    // An idle pool does not keep the process alive; jobs in flight are held by their callers.
    worker.unref();
    const slot: Slot = { worker, pending: new Map() };
    this.slots[at] = slot;
    worker.on('message', (reply: RankReply) => {
      if ('id' in reply) {
        const pending = slot.pending.get(reply.id);
        if (!pending) return;
        slot.pending.delete(reply.id);
        if (slot.pending.size === 0) worker.unref();
        if ('body' in reply) pending.resolve(Buffer.from(reply.body.buffer, reply.body.byteOffset, reply.body.byteLength));
        else if ('error' in reply)
          pending.reject(new PlatformError(reply.error.code, reply.error.message, { hint: reply.error.hint, details: reply.error.details }));
        else pending.reject(jobError(reply.failure));
      } else if ('log' in reply) {
        this.options.log?.warn({ err: reply.error, worker: at }, reply.log);
      }
    });
    worker.on('error', (error) => this.options.log?.warn({ err: error, worker: at }, 'directory ranking worker failed'));
    worker.on('exit', (code) => {
      if (this.slots[at] === slot) this.slots[at] = null;
      for (const pending of slot.pending.values()) pending.reject(new Error(`directory ranking worker ${at} stopped (exit code ${code})`));
      slot.pending.clear();
      if (this.closed) return;
      this.options.log?.warn({ worker: at, code }, 'directory ranking worker stopped; starting another');
      const timer = setTimeout(
        () => {
          if (!this.closed && this.slots[at] === null) this.spawn(at);
        },
        Math.max(0, startedAt + RESPAWN_MIN_INTERVAL_MS - Date.now()),
      );
      timer.unref();
    });
  }
}
