import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  CallabilityCatalog,
  DiscoveryListings,
  inProcessRanking,
  LiveDirectoryIndex,
  modelDirSetting,
  RankPool,
  RemoteRanking,
  type DirectoryRanking,
} from '#core/directory';

declare module 'fastify' {
  interface FastifyInstance {
    directoryIndex: LiveDirectoryIndex;
    /**
     * Search and discovery answers: from the directory ranking process (DIRECTORY_RANK_URL), or ranked
     * in this process, on its event loop or in worker threads (DIRECTORY_RANK_WORKERS).
     */
    directoryRanking: DirectoryRanking;
    /** The ranking process this edge asks, for GET /health; null when it ranks in process. */
    remoteRanking: RemoteRanking | null;
    /** Every API's access facts, for "can I call this?" (see CallabilityCatalog). */
    callability: CallabilityCatalog;
    /**
     * What each discovery listed to an account, written in batches (discovery's feedback signal); null when
     * the signal is off (DISCOVERY_FEEDBACK_REFRESH_SECONDS 0): nothing is kept then.
     */
    discoveryListings: DiscoveryListings | null;
  }
}

/**
 * The edge's API access facts for "can I call this?" (CallabilityCatalog) and where search and
 * discovery rank: in the directory ranking process every edge on the machine shares
 * (DIRECTORY_RANK_URL; docs/decisions/directory-ranking-process.md), or, for tests and development,
 * in this process: on the event loop from the in-process index (DIRECTORY_RANK_WORKERS=0) or in a
 * pool of worker threads with an index each (RankPool). The in-process index (LiveDirectoryIndex)
 * is decorated either way but loads only when something asks it: the routes rank through
 * directoryRanking, and browsing without q reads Postgres, so with a ranking process or worker
 * threads it stays unloaded (the tests and the evaluation script use it). All are closed with the app.
 */
export default fp(
  async function directoryIndexPlugin(app: FastifyInstance) {
    const { sql, settings } = app.deps;
    const modelDir = modelDirSetting(settings.DISCOVERY_MODEL_DIR);
    const rememberTasks = settings.DISCOVERY_TASK_VECTORS;
    const feedbackRefreshMs = settings.DISCOVERY_FEEDBACK_REFRESH_SECONDS * 1000;
    const index = new LiveDirectoryIndex(sql, app.log, { modelDir, rememberTasks, feedbackRefreshMs });
    app.decorate('directoryIndex', index);
    const callability = new CallabilityCatalog(sql, app.log);
    app.decorate('callability', callability);
    const remote = settings.DIRECTORY_RANK_URL === null ? null : new RemoteRanking(settings.DIRECTORY_RANK_URL);
    const workers = settings.DIRECTORY_RANK_WORKERS;
    const pool =
      remote === null && workers > 0
        ? new RankPool({ size: workers, databaseUrl: settings.DATABASE_URL, modelDir, rememberTasks, feedbackRefreshMs, log: app.log })
        : null;
    app.decorate('remoteRanking', remote);
    const listings = feedbackRefreshMs > 0 ? new DiscoveryListings(sql, { log: app.log }) : null;
    app.decorate('discoveryListings', listings);
    app.decorate('directoryRanking', remote ?? pool ?? inProcessRanking(index, callability));
    app.addHook('onClose', async () => {
      await Promise.all([index.close(), pool?.close(), remote?.close(), callability.close(), listings?.close()]);
    });
  },
  { name: 'directory-index', dependencies: ['deps'] },
);
