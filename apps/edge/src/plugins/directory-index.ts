import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CallabilityCatalog, inProcessRanking, LiveDirectoryIndex, modelDirSetting, RankPool, type DirectoryRanking } from '#core/directory';

declare module 'fastify' {
  interface FastifyInstance {
    directoryIndex: LiveDirectoryIndex;
    /** Search and discovery answers: ranked on this event loop, or in worker threads (DIRECTORY_RANK_WORKERS). */
    directoryRanking: DirectoryRanking;
    /** Every API's access facts, for "can I call this?" (see CallabilityCatalog). */
    callability: CallabilityCatalog;
  }
}

/**
 * The edge's in-process ranking index of the catalog (see LiveDirectoryIndex), its API access facts
 * for "can I call this?" (CallabilityCatalog), and where search and
 * discovery rank: on the event loop from that index (DIRECTORY_RANK_WORKERS=0), or in a pool of
 * worker threads with an index each (RankPool), which leaves the index here unloaded unless
 * something else asks it. Both are closed with the app.
 */
export default fp(
  async function directoryIndexPlugin(app: FastifyInstance) {
    const { sql, settings } = app.deps;
    const modelDir = modelDirSetting(settings.DISCOVERY_MODEL_DIR);
    const rememberTasks = settings.DISCOVERY_TASK_VECTORS;
    const index = new LiveDirectoryIndex(sql, app.log, { modelDir, rememberTasks });
    app.decorate('directoryIndex', index);
    const callability = new CallabilityCatalog(sql, app.log);
    app.decorate('callability', callability);
    const workers = settings.DIRECTORY_RANK_WORKERS;
    const pool = workers > 0 ? new RankPool({ size: workers, databaseUrl: settings.DATABASE_URL, modelDir, rememberTasks, log: app.log }) : null;
    app.decorate('directoryRanking', pool ?? inProcessRanking(index, callability));
    app.addHook('onClose', async () => {
      await Promise.all([index.close(), pool?.close(), callability.close()]);
    });
  },
  { name: 'directory-index', dependencies: ['deps'] },
);
