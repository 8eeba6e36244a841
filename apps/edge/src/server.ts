// The edge's process entry: parse settings, build the app, listen, and shut down gracefully.
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import pino from 'pino';
import { BlockLogWriter, loadSettingsOrExit } from '#core/platform';
import { buildApp, edgeLogger } from './app.js';
import { loadEdgeSettings } from './config.js';

const settings = loadSettingsOrExit(loadEdgeSettings);
// Before the app allocates much: V8 reads the factor each time it sets the next full collection's limit.
if (settings.EDGE_HEAP_GROWING_PERCENT > 0) setFlagsFromString(`--heap-growing-percent=${settings.EDGE_HEAP_GROWING_PERCENT}`);

// Log lines leave in blocks (see LOG_BUFFER_BYTES), written from Buffers by the platform's own writer
// (BlockLogWriter: with pino's sonic-boom a line cost 8.2 µs of CPU, with it 3.3 µs); a quiet edge still
// writes its lines within a second (periodic flush). A graceful shutdown awaits the flush below; any
// other exit writes the lines gathered synchronously (the exit hook). LOG_BUFFER_BYTES=0 writes each
// line synchronously as it is logged.
const logStream =
  settings.LOG_BUFFER_BYTES === 0
    ? pino.destination({ dest: 1, sync: true })
    : new BlockLogWriter({
        fd: 1,
        minLength: settings.LOG_BUFFER_BYTES,
        flushIntervalMs: 1_000,
        onError: (error) =>
          process.stderr.write(`log lines could not be written to stdout (${error.code ?? error.message}); those of this block are lost\n`),
      });
if (logStream instanceof BlockLogWriter) process.on('exit', () => logStream.flushSync());
/** Waits until every buffered line was handed to stdout (a write in progress included). */
const flushLogs = () =>
  new Promise<void>((resolve) => {
    if (!(logStream instanceof BlockLogWriter)) return resolve();
    const timer = setTimeout(resolve, 2_000);
    logStream.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
const app = await buildApp(settings, { logger: { ...edgeLogger(settings), stream: logStream } });
const SHUTDOWN_GRACE_MS = 10_000;
let closing = false;

async function shutdown(signal: string) {
  if (closing) return;
  closing = true;
  app.log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
  const timer = setTimeout(() => {
    app.log.error('graceful shutdown timed out; exiting');
    process.exit(1);
  }, SHUTDOWN_GRACE_MS);
  timer.unref();
  await app.close();
  await flushLogs();
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

try {
  await app.listen({ host: settings.HOST, port: settings.PORT });
  app.log.info(`API ${settings.PUBLIC_URL}/api/v1 · reference ${settings.PUBLIC_URL}/api/v1/reference`);
  // Ranking in this process holds the index and model per thread (about 1 GB): the heap limits meant for
  // an edge that asks the ranking process (EDGE_NODE_OPTIONS) would stop it out of memory at the first search.
  const heapLimitMb = Math.round(getHeapStatistics().heap_size_limit / 2 ** 20);
  if (settings.DIRECTORY_RANK_URL === null && heapLimitMb < 1024)
    app.log.warn(
      { heapLimitMb },
      'DIRECTORY_RANK_URL is empty, so this edge ranks search and discovery itself (about 1 GB), but its heap is limited to ' +
        `${heapLimitMb} MB: set DIRECTORY_RANK_URL to the directory ranking process, or run this edge with EDGE_NODE_OPTIONS empty`,
    );
} catch (error) {
  app.log.fatal({ err: error }, 'could not start the edge');
  process.exit(1);
}
