import type { FastifyInstance } from 'fastify';
import usagePlugin from '../plugins/usage.js';
import balanceRoutes from './balance.js';
import connectionRoutes from './connections.js';
import healthRoutes from './health.js';
import proxyRoutes from './proxy.js';
import usageRoutes from './usage.js';

/**
 * Every route module of the versioned API, one per resource of the specification. Each is mounted
 * under /api/v1 and appears in the OpenAPI document automatically.
 */
export async function registerApiRoutes(app: FastifyInstance): Promise<void> {
  await app.register(usagePlugin);
  await app.register(
    async (api) => {
      await api.register(healthRoutes);
      await api.register(balanceRoutes);
      await api.register(connectionRoutes);
      await api.register(usageRoutes);
      // Encapsulated: its own raw-stream content-type parser and body limit.
      await api.register(proxyRoutes);
    },
    { prefix: '/api/v1' },
  );
}
