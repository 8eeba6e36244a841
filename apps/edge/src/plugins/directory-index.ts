import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { LiveDirectoryIndex } from '#core/directory';

declare module 'fastify' {
  interface FastifyInstance {
    directoryIndex: LiveDirectoryIndex;
  }
}

/** The edge's in-process ranking index of the catalog (see LiveDirectoryIndex), closed with the app. */
export default fp(
  async function directoryIndexPlugin(app: FastifyInstance) {
    const index = new LiveDirectoryIndex(app.deps.sql, app.log);
    app.decorate('directoryIndex', index);
    app.addHook('onClose', async () => index.close());
  },
  { name: 'directory-index', dependencies: ['deps'] },
);
