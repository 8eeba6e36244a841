// The directory ranking process: search and discovery ranked for every edge on the machine, which
// ask it over HTTP on a private port (DIRECTORY_RANK_URL; packages/core/directory/rank-remote.ts has
// the wire). It holds the directory index, WordNet and discovery's embedding model, loaded at start
// and kept current by LISTEN, on its event loop (DIRECTORY_RANK_WORKERS=0) or in worker threads with
// a copy each; the edges hold none (docs/decisions/directory-ranking-process.md).
import pino from 'pino';
import { CallabilityCatalog, inProcessRanking, LiveDirectoryIndex, modelDirSetting, RankPool, rankingServer } from '#core/directory';
import { loadSettingsOrExit } from '#core/platform';
import { createSql } from '#db/sql';
import { onShutdown } from '../lifecycle.js';
import { loadRankerSettings } from './settings.js';

const settings = loadSettingsOrExit(loadRankerSettings);
const log = pino({ level: settings.LOG_LEVEL, base: { process: 'directory-ranker' } });
const modelDir = modelDirSetting(settings.DISCOVERY_MODEL_DIR);
const rememberTasks = settings.DISCOVERY_TASK_VECTORS;
const feedbackRefreshMs = settings.DISCOVERY_FEEDBACK_REFRESH_SECONDS * 1000;
const threads = settings.DIRECTORY_RANK_WORKERS;

// Ranking on this event loop needs the index here; with threads, each thread loads its own.
const sql = createSql(settings.DATABASE_URL, { max: 4, appName: 'directory-ranker' });
const index = threads === 0 ? new LiveDirectoryIndex(sql, log, { modelDir, rememberTasks, feedbackRefreshMs }) : null;
const catalog = threads === 0 ? new CallabilityCatalog(sql, log) : null;
const pool =
  threads > 0 ? new RankPool({ size: threads, databaseUrl: settings.DATABASE_URL, modelDir, rememberTasks, feedbackRefreshMs, log }) : null;
const ranking = pool ?? inProcessRanking(index!, catalog!);

// Loaded now, so the first edge's question does not wait for it; a failure is retried by the first question.
if (pool) pool.start();
else
  void Promise.all([index!.get(), catalog!.snapshot()]).then(
    () => log.info('directory index loaded'),
    (error: unknown) => log.warn({ err: error }, 'loading the directory index failed; the first question retries'),
  );

const server = rankingServer(ranking, log);
await new Promise<void>((resolve, reject) => {
  server.once('error', reject);
  server.listen(settings.DIRECTORY_RANK_PORT, settings.DIRECTORY_RANK_HOST, () => resolve());
});
const address = server.address();
const port = typeof address === 'object' && address ? address.port : settings.DIRECTORY_RANK_PORT;
log.info({ url: `http://${settings.DIRECTORY_RANK_HOST}:${port}`, threads }, 'directory ranking process listening');

onShutdown(log, settings.SHUTDOWN_GRACE_SECONDS, async () => {
  // Answers in flight finish; kept-alive idle connections close (edges reconnect to the next process).
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await closed;
  await Promise.allSettled([pool?.close(), index?.close(), catalog?.close()]);
  await sql.end({ timeout: 5 }).catch(() => {});
});
