import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { changeKey, issueKey, listKeys, type KeyRow } from '#core/identity';
import { formatDollars, parseDollars, toDollars } from '#contracts/money';
import { requireAuth } from '../plugins/auth.js';
import { apiId as API_ID } from '#contracts/directory';
import { errorResponses } from './error-responses.js';
import { emitAfterChange } from './webhooks.js';
import { agentKeyMeta as agentKey } from '#contracts/keys';
import { announceKeyChange, fullKeySchema, invalid, keyIdParams, keyName, listQuery, toKeyMeta } from './keys.js';

export function toAgentKey(key: KeyRow): z.infer<typeof agentKey> {
  return {
    ...toKeyMeta(key),
    spendLimit: key.spend_limit_micros === null ? null : toDollars(key.spend_limit_micros),
    spent: toDollars(key.spent_micros),
    allowedApis: key.allowed_apis,
    expiresAt: key.expires_at?.toISOString() ?? null,
    mcpClient: key.oauth_client_id === null ? null : { id: key.oauth_client_id, name: key.oauth_client_name ?? key.oauth_client_id },
  };
}

/** An agent key's limits as a body gives them (also the MCP consent page's choices). */
export const agentKeyLimits = {
  spendLimit: z.union([z.number(), z.string()]).optional().describe('Dollars, e.g. 5 or "2.50"'),
  allowedApis: z.array(API_ID).max(200).optional(),
  expiresAt: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z' }).optional(),
};

const createBody = z.object({ name: keyName, ...agentKeyLimits }).strict();

/** The limits of a body, checked: a dollar amount, an expiry in the future, distinct API ids. */
export function parseAgentKeyLimits(body: {
  spendLimit?: number | string | undefined;
  allowedApis?: string[] | undefined;
  expiresAt?: string | undefined;
}) {
  let spendLimitMicros: bigint | null = null;
  if (body.spendLimit !== undefined) {
    spendLimitMicros = parseDollars(body.spendLimit);
    if (spendLimitMicros === null)
      throw invalid('spendLimit', 'must be a non-negative dollar amount', 'Use at most six decimal places, e.g. 5 or "2.50".');
  }
  let expiresAt: Date | null = null;
  if (body.expiresAt !== undefined) {
    expiresAt = new Date(body.expiresAt);
    if (expiresAt.getTime() <= Date.now()) throw invalid('expiresAt', 'must be in the future');
  }
  const allowedApis = body.allowedApis === undefined ? null : [...new Set(body.allowedApis)];
  return { spendLimitMicros, expiresAt, allowedApis };
}

/**
 * /agent-keys: keys an account hands to its agents, with an optional spend limit, API allow-list and
 * expiry (enforced on charged calls by the charging path). Deleting one revokes it for good and
 * hides it from the list; its row stays so the ledger keeps naming it.
 */
const agentKeyRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql } = app.deps;

  app.post(
    '/agent-keys',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['agent keys'],
        summary: 'Create an agent key; the full key is in this response only',
        body: createBody,
        response: { 201: z.object({ ok: z.literal(true), agentKey, fullKey: fullKeySchema }), ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request, reply) => {
      const { accountId } = requireAuth(request);
      const body = request.body;
      const { spendLimitMicros, expiresAt, allowedApis } = parseAgentKeyLimits(body);
      const { key, fullKey } = await issueKey(
        sql,
        { accountId, kind: 'agent', name: body.name, spendLimitMicros, allowedApis, expiresAt },
        app.deps.settings.MAX_KEYS_PER_ACCOUNT,
      );
      request.log.info({ keyId: key.id, spendLimit: spendLimitMicros === null ? null : formatDollars(spendLimitMicros) }, 'agent key created');
      return reply.code(201).send({ ok: true as const, agentKey: toAgentKey(key), fullKey });
    },
  );

  app.get(
    '/agent-keys',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['agent keys'],
        summary: "List the account's agent keys (never the full key), newest first",
        querystring: listQuery,
        response: {
          200: z.object({ ok: z.literal(true), agentKeys: z.array(agentKey), nextCursor: z.string().nullable() }),
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      const page = await listKeys(sql, {
        accountId,
        kind: 'agent',
        limit: request.query.limit,
        cursor: request.query.cursor ?? null,
        includeRevoked: false,
      });
      return { ok: true as const, agentKeys: page.keys.map(toAgentKey), nextCursor: page.nextCursor };
    },
  );

  app.delete(
    '/agent-keys/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['agent keys'],
        summary: 'Delete (revoke) an agent key; requests using it get 403 from then on',
        params: keyIdParams,
        response: { 200: z.object({ ok: z.literal(true), agentKey }), ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const { accountId } = requireAuth(request);
      let key: KeyRow;
      try {
        key = await changeKey(sql, { accountId, kind: 'agent', keyId: request.params.id, change: { status: 'revoked' } });
      } catch (error) {
        // A deleted agent key is gone from the caller's point of view: deleting it again is 404.
        if (error instanceof PlatformError && error.code === 'conflict') {
          throw new PlatformError('not_found', `Agent key ${request.params.id} was already deleted`, {
            hint: 'List yours with GET /api/v1/agent-keys.',
          });
        }
        throw error;
      }
      await emitAfterChange(app, accountId, 'key.revoked', { keyId: key.id, kind: 'agent', name: key.name, prefix: key.prefix });
      return { ok: true as const, agentKey: toAgentKey(await announceKeyChange(app, key)) };
    },
  );
};

export default agentKeyRoutes;
