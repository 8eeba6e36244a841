import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { connectApi, disconnectApi, listConnections, type Connection } from '#core/gateway';
import { notFound } from '#core/platform';
import { resolveConnectRequests } from '#core/connect-requests';
import { requireAuth } from '../plugins/auth.js';

import { apiId as API_ID } from '#contracts/directory';

const connectionSchema = z.object({ apiId: z.string(), keyHint: z.string(), createdAt: z.string(), updatedAt: z.string() });
const present = (c: Connection) => ({
  apiId: c.apiId,
  keyHint: c.keyHint,
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

/** Bring your own key: the caller stores their own upstream key; the proxy then uses it. */
/**
 * Every edge's proxy drops what it remembered of a connection (none, or the replaced key): this edge
 * at once, the others through Redis. The row is already written, so a failed announcement does not
 * fail the request; the other edges then see the change within CONNECTION_CACHE_TTL_MS.
 */
async function announceChange(request: FastifyRequest, accountId: string, apiId: string): Promise<void> {
  try {
    await request.server.connectionCache.changed(request.server.deps.redis, accountId, apiId);
  } catch (error) {
    request.log.warn({ err: error, apiId }, 'connection change not announced to the other edges; they see it within CONNECTION_CACHE_TTL_MS');
  }
}

const connectionRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/connect/:apiId',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['connections'],
        summary: 'Store your own key for an API (encrypted at rest, never returned); replaces an earlier one',
        params: z.object({ apiId: API_ID }),
        body: z.object({ apiKey: z.string().trim().min(1).max(4096).describe('Your key for the upstream API') }),
        response: { 201: z.object({ ok: z.literal(true), connection: connectionSchema }) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const { sql, settings } = request.server.deps;
      const connection = await connectApi(sql, settings.CONNECTIONS_MASTER_KEY, {
        accountId: auth.accountId,
        apiId: request.params.apiId,
        apiKey: request.body.apiKey,
      });
      await announceChange(request, auth.accountId, connection.apiId);
      // The key answers the account's pending connect requests for this API. The key is stored
      // either way: a failure here leaves those requests pending, which a new connect resolves.
      try {
        await resolveConnectRequests(
          sql,
          { accountId: auth.accountId, apiId: connection.apiId, personId: auth.personId },
          app.connectRequests.notices,
        );
      } catch (error) {
        request.log.warn({ err: error, apiId: connection.apiId }, 'pending connect requests not marked connected');
      }
      return reply.code(201).send({ ok: true as const, connection: present(connection) });
    },
  );

  app.delete(
    '/connect/:apiId',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['connections'],
        summary: 'Disconnect: delete your stored key for an API',
        params: z.object({ apiId: API_ID }),
        response: { 200: z.object({ ok: z.literal(true), connection: connectionSchema }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const removed = await disconnectApi(request.server.deps.sql, auth.accountId, request.params.apiId);
      if (removed) await announceChange(request, auth.accountId, removed.apiId);
      if (!removed) throw notFound(`Connection to ${request.params.apiId}`, 'GET /api/v1/me/apis lists your connections.');
      return { ok: true as const, connection: present(removed) };
    },
  );

  app.get(
    '/me/apis',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['connections'],
        summary: 'Your connected APIs (key hints only)',
        response: { 200: z.object({ ok: z.literal(true), connections: z.array(connectionSchema) }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return { ok: true as const, connections: (await listConnections(request.server.deps.sql, auth.accountId)).map(present) };
    },
  );
};

export default connectionRoutes;
