// A ranking worker thread (see rank-pool.ts): its own directory index, loaded at start and kept
// current by LISTEN like the edge's, answering search and discovery jobs as JSON bytes.
import { parentPort, workerData } from 'node:worker_threads';
import { PlatformError } from '#core/platform';
import { createSql } from '#db/sql';
import { discoverAnswer, searchAnswer } from './answers.js';
import { CallabilityCatalog } from './callability.js';
import { LiveDirectoryIndex } from './index-loader.js';
import type { RankJob, RankReply, RankWorkerData } from './rank-pool.js';

const port = parentPort!;
const { databaseUrl, modelDir, rememberTasks, feedbackRefreshMs } = workerData as RankWorkerData;
const send = (reply: RankReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

// One connection loads the index (one transaction) and reads the access facts, one reads discovery's
// feedback signal (a second or more on a large database: the access facts must not wait behind it), one
// more LISTENs (postgres.js opens it apart).
const sql = createSql(databaseUrl, { max: feedbackRefreshMs ? 2 : 1, appName: 'edge-directory-rank' });
const index = new LiveDirectoryIndex(
  sql,
  {
    warn: (object, message) => send({ log: message, error: object.err instanceof Error ? object.err.message : String(object.err ?? '') }),
  },
  { modelDir, rememberTasks, feedbackRefreshMs },
);
const catalog = new CallabilityCatalog(sql, {
  warn: (object, message) => send({ log: message, error: object.err instanceof Error ? object.err.message : String(object.err ?? '') }),
});
// Loaded at once, so the first job does not wait for it; a failure here is retried by the first job.
Promise.all([index.get(), catalog.snapshot()]).then(
  () => send({ ready: true }),
  (error: unknown) =>
    send({
      log: 'directory ranking worker: loading the index failed; the next job retries',
      error: error instanceof Error ? error.message : String(error),
    }),
);

async function answer(job: Exclude<RankJob, { op: 'close' }>): Promise<void> {
  try {
    const body = job.op === 'search' ? await searchAnswer(index, catalog, job.request) : await discoverAnswer(index, catalog, job.request);
    // The answer's own buffer (not a slice of a shared pool) moves to the edge's thread without a copy.
    send({ id: job.id, body }, [body.buffer as ArrayBuffer]);
  } catch (error) {
    if (error instanceof PlatformError) {
      send({ id: job.id, error: { code: error.code, message: error.message, hint: error.hint, details: error.details } });
    } else {
      const err = error as { message?: unknown; code?: unknown; stack?: unknown };
      send({
        id: job.id,
        failure: {
          message: String(err?.message ?? error),
          code: typeof err?.code === 'string' ? err.code : undefined,
          stack: typeof err?.stack === 'string' ? err.stack : undefined,
        },
      });
    }
  }
}

port.on('message', (job: RankJob) => {
  if (job.op === 'close') {
    void (async () => {
      await index.close().catch(() => {});
      await catalog.close().catch(() => {});
      await sql.end({ timeout: 5 }).catch(() => {});
      send({ closed: true });
      port.close();
    })();
    return;
  }
  void answer(job);
});
