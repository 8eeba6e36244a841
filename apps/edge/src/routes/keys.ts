import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { changeKey, issueKey, listKeys, type KeyRow } from '#core/identity';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';
import { emitAfterChange } from './webhooks.js';
import { keyMeta, type KeyMeta } from '#contracts/keys';

export function toKeyMeta(key: KeyRow): KeyMeta {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    status: key.status,
    createdAt: key.created_at.toISOString(),
    lastUsedAt: key.last_used_at?.toISOString() ?? null,
  };
}

export const keyName = z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters');
export const fullKeySchema = z.string().describe('The full key, shown in this response only: store it now');
export const listQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().min(1).max(100).optional().describe('nextCursor of the previous page'),
});
export const keyIdParams = z.object({ id: z.string().min(1).max(100) });

const patchBody = z
  .object({
    name: keyName.optional(),
    status: z.enum(['enabled', 'disabled']).optional().describe('Revoke with DELETE instead'),
  })
  .strict()
  .refine((body) => body.name !== undefined || body.status !== undefined, { message: 'give name and/or status' });

/**
 * After a key row changed: this instance forgets the key at once (and closes the event streams it
 * opened if it no longer works), the others within a pub/sub round trip; a refused publish is retried.
 */
export async function announceKeyChange(app: FastifyInstance, key: KeyRow): Promise<KeyRow> {
  app.keyVerifier.announce(key.id);
  return key;
}

/** /keys: the account's API keys (agent keys live under /agent-keys). Managing keys needs an account credential. */
const keyRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql } = app.deps;

  app.post(
    '/keys',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['keys'],
        summary: 'Create an API key; the full key is in this response only',
        body: z.object({ name: keyName }).strict(),
        response: { 201: z.object({ ok: z.literal(true), key: keyMeta, fullKey: fullKeySchema }), ...errorResponses(400, 401, 403, 409, 429) },
      },
    },
    async (request, reply) => {
      const { accountId } = requireAuth(request);
      const { key, fullKey } = await issueKey(sql, { accountId, kind: 'api', name: request.body.name }, app.deps.settings.MAX_KEYS_PER_ACCOUNT);
      return reply.code(201).send({ ok: true as const, key: toKeyMeta(key), fullKey });
    },
  );

  app.get(
    '/keys',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['keys'],
        summary: "List the account's API keys (prefix and metadata, never the full key), newest first",
        querystring: listQuery,
        response: {
          200: z.object({ ok: z.literal(true), keys: z.array(keyMeta), nextCursor: z.string().nullable() }),
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const page = await listKeys(sql, {
        accountId,
        kind: 'api',
        limit: request.query.limit,
        cursor: request.query.cursor ?? null,
        includeRevoked: true,
      });
      return { ok: true as const, keys: page.keys.map(toKeyMeta), nextCursor: page.nextCursor };
    },
  );

  app.patch(
    '/keys/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['keys'],
        summary: 'Rename a key and/or disable or enable it',
        description: 'Body `{ name?, status?: "enabled" | "disabled" }`, at least one. A revoked key cannot be changed (409).',
        params: keyIdParams,
        body: patchBody,
        response: { 200: z.object({ ok: z.literal(true), key: keyMeta }), ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const key = await changeKey(sql, { accountId, kind: 'api', keyId: request.params.id, change: request.body });
      return { ok: true as const, key: toKeyMeta(await announceKeyChange(app, key)) };
    },
  );

  app.delete(
    '/keys/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['keys'],
        summary: 'Revoke a key permanently (enabled or disabled keys)',
        params: keyIdParams,
        response: { 200: z.object({ ok: z.literal(true), key: keyMeta }), ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const key = await changeKey(sql, { accountId, kind: 'api', keyId: request.params.id, change: { status: 'revoked' } });
      await emitAfterChange(app, accountId, 'key.revoked', { keyId: key.id, kind: 'api', name: key.name, prefix: key.prefix });
      return { ok: true as const, key: toKeyMeta(await announceKeyChange(app, key)) };
    },
  );
};

export default keyRoutes;

/** Throws 400 with the field named when a value is not acceptable after schema validation. */
export const invalid = (field: string, message: string, hint?: string) =>
  new PlatformError('validation_failed', `Invalid request body.${field}: ${message}`, hint === undefined ? {} : { hint });
