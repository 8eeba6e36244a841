import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { issueKey } from '#core/identity';
import { PlatformError } from '#core/platform';
import { agentKeyMeta } from '#contracts/keys';
import { requireAuth } from '../plugins/auth.js';
import type { PendingAuthorization } from '../oauth2/provider.js';
import { agentKeyLimits, parseAgentKeyLimits, toAgentKey } from './agent-keys.js';
import { errorResponses } from './error-responses.js';
import { keyName } from './keys.js';

const uidParams = z.object({ uid: z.string().min(1).max(100).describe('The interaction id the consent page was opened with') });

const pendingSchema = z.object({
  uid: z.string(),
  client: z.object({
    id: z.string().describe('The OAuth client id (a URL for a client known by its Client ID Metadata Document)'),
    name: z.string().nullable().describe('The name the client gave itself: unverified'),
    redirectHost: z.string().describe('Where the browser goes back to after consent'),
    redirectUri: z.string(),
    clientUri: z.string().nullable(),
    registration: z.enum(['metadata_document', 'dynamic']),
  }),
  scopes: z.array(z.string()),
  resource: z.string().describe('What the access is for: the MCP endpoint'),
  expiresAt: z.string().describe('ISO 8601: the request must be answered before then'),
});

const toPending = (pending: PendingAuthorization): z.infer<typeof pendingSchema> => ({ ...pending, expiresAt: pending.expiresAt.toISOString() });

/** Consent is a person's act: only the dashboard's session (of the account's owner) gives it, never a key. */
function requirePerson(request: FastifyRequest) {
  const caller = requireAuth(request);
  if (request.dashboardSession === null) {
    throw new PlatformError('forbidden', 'Consent to an MCP client is given in the dashboard', {
      hint: 'Open the consent page the MCP client sent you to, signed in to the dashboard.',
    });
  }
  return caller;
}

const redirectAnswer = z.object({
  ok: z.literal(true),
  redirectTo: z.string().describe('Send the browser here: the authorization server finishes the flow'),
});

/**
 * The dashboard's half of the platform's authorization server (oauth2/): the consent page reads a
 * pending authorization request, then approves it with an agent key's limits (the grant becomes an
 * agent key of the account, listed among the keys) or denies it.
 */
const mcpConsentRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;

  app.get(
    '/oauth2/interactions/:uid',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['mcp consent'],
        summary: 'An MCP client’s pending authorization request, as the consent page shows it (dashboard session only)',
        params: uidParams,
        response: { 200: z.object({ ok: z.literal(true), request: pendingSchema }), ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      requirePerson(request);
      return { ok: true as const, request: toPending(await (await app.authorizationServer.get()).pending(request.params.uid)) };
    },
  );

  app.post(
    '/oauth2/interactions/:uid/approve',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['mcp consent'],
        summary: 'Approve an MCP client’s request with the limits its access carries (dashboard session only)',
        description:
          'Makes an agent key for the client (spend limit, API allow-list and expiry as for POST /agent-keys; its secret is never shown) and a grant the client’s access tokens stand for. Deleting the agent key revokes the grant and its tokens.',
        params: uidParams,
        body: z.object({ name: keyName.optional().describe('Defaults to "MCP: " and the client’s name'), ...agentKeyLimits }).strict(),
        response: { 200: redirectAnswer.extend({ agentKey: agentKeyMeta }), ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request) => {
      const { accountId } = requirePerson(request);
      const limits = parseAgentKeyLimits(request.body);
      const { redirectTo, key } = await (
        await app.authorizationServer.get()
      ).approve(request.params.uid, accountId, async (grantId, pending) => {
        const clientName = (pending.client.name ?? pending.client.redirectHost).slice(0, 90);
        const { key } = await issueKey(
          sql,
          {
            accountId,
            kind: 'agent',
            name: request.body.name ?? `MCP: ${clientName}`,
            ...limits,
            oauth: { grantId, clientId: pending.client.id, clientName },
          },
          settings.MAX_KEYS_PER_ACCOUNT,
        );
        return key;
      });
      request.log.info({ keyId: key.id, clientId: key.oauth_client_id }, 'MCP client approved');
      return { ok: true as const, redirectTo, agentKey: toAgentKey(key) };
    },
  );

  app.post(
    '/oauth2/interactions/:uid/deny',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['mcp consent'],
        summary: 'Refuse an MCP client’s request; the client is told access_denied (dashboard session only)',
        params: uidParams,
        response: { 200: redirectAnswer, ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      requirePerson(request);
      return { ok: true as const, ...(await (await app.authorizationServer.get()).deny(request.params.uid)) };
    },
  );
};

export default mcpConsentRoutes;
