// The edge's process entry: parse settings, build the app, listen, and shut down gracefully.
import { loadSettingsOrExit } from '../../../db/src/settings.js';
import { buildApp } from './app.js';
import { loadEdgeSettings } from './config.js';

const settings = loadSettingsOrExit(loadEdgeSettings);

const app = await buildApp(settings);
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
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

try {
  await app.listen({ host: settings.HOST, port: settings.PORT });
  app.log.info(`API ${settings.PUBLIC_URL}/api/v1 · reference ${settings.PUBLIC_URL}/api/v1/reference`);
} catch (error) {
  app.log.fatal({ err: error }, 'could not start the edge');
  process.exit(1);
}
