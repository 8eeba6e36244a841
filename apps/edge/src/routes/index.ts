import type { FastifyInstance } from 'fastify';
import healthRoutes from './health.js';

/**
 * Every route module of the versioned API, one per resource of the specification. Each is mounted
 * under /api/v1 and appears in the OpenAPI document automatically.
 */
export async function registerApiRoutes(app: FastifyInstance): Promise<void> {
  await app.register(
    async (api) => {
      await api.register(healthRoutes);
    },
    { prefix: '/api/v1' },
  );
}
