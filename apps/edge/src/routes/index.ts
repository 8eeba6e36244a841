import type { FastifyInstance } from 'fastify';
import directoryRoutes from './directory.js';
import docsRoutes from './docs.js';
import healthRoutes from './health.js';
import voteRoutes from './votes.js';

/**
 * Every route module of the versioned API, one per resource of the specification. Each is mounted
 * under /api/v1 and appears in the OpenAPI document automatically.
 */
export async function registerApiRoutes(app: FastifyInstance): Promise<void> {
  await app.register(
    async (api) => {
      await api.register(healthRoutes);
      await api.register(directoryRoutes);
      await api.register(docsRoutes);
      await api.register(voteRoutes);
    },
    { prefix: '/api/v1' },
  );
}
