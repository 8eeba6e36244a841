import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { resolveConnectRequests } from '#core/connect-requests';
import { verifyDashboardSession } from '#core/identity';
import {
  completeConsent,
  connectClientCredentials,
  disconnectOAuth,
  listOAuthAppViews,
  listOAuthConnectionViews,
  makeDefaultConnection,
  registerOAuthApp,
  removeOAuthApp,
  renameConnection,
  startConsent,
  type ConsentOutcome,
  type OAuthAppView,
  type OAuthConnectionView,
} from '#core/oauth';
import { notFound, PlatformError } from '#core/platform';
import { requireAuth } from '../plugins/auth.js';
import { SESSION_COOKIE } from '../http/dashboard-session.js';
import { apiId as API_ID } from '#contracts/directory';
import { errorResponses } from './error-responses.js';

const iso = (date: Date | null) => date?.toISOString() ?? null;

const PROVIDER = z.string().trim().min(1).max(260).describe("The authorization server's host, e.g. accounts.google.com");
const SCOPES = z.array(z.string().min(1).max(256)).max(100);
const LABEL = z.string().trim().min(1).max(64).describe('A name for the connection, unique per provider: letters, digits, spaces and . _ @ -');

const connectionSchema = z.object({
  id: z.string().describe('Send it (or the label) in X-Service-Connection to use this connection'),
  provider: z.string(),
  label: z.string(),
  isDefault: z.boolean().describe('Calls without X-Service-Connection use the default connection of the API provider'),
  status: z.enum(['ready', 'needs_reauth']),
  statusReason: z.string().nullable().describe('Why a person must reconnect it (needs_reauth)'),
  grantType: z.enum(['authorization_code', 'client_credentials']),
  scopes: z.array(z.string()),
  expiresAt: z.string().nullable().describe('When the current access token expires; the platform renews it'),
  renewable: z.boolean().describe('Whether the platform can renew the access without a person'),
  refreshedAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const presentConnection = (c: OAuthConnectionView) => ({
  ...c,
  expiresAt: iso(c.expiresAt),
  refreshedAt: iso(c.refreshedAt),
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

const appSchema = z.object({
  id: z.string(),
  provider: z.string(),
  owner: z.enum(['operator', 'account']),
  clientId: z.string(),
  hasClientSecret: z.boolean(),
  authorizationUrl: z.string(),
  tokenUrl: z.string(),
  revocationUrl: z.string().nullable(),
  issuer: z.string(),
  defaultScopes: z.array(z.string()),
  authorizationParams: z.record(z.string(), z.string()),
  tokenAuthMethod: z.enum(['client_secret_basic', 'client_secret_post', 'none']),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const presentApp = (a: OAuthAppView) => ({ ...a, createdAt: a.createdAt.toISOString(), updatedAt: a.updatedAt.toISOString() });

/** The consent flow is a person's: it needs the dashboard session its state is bound to. */
function requireDashboardSession(request: FastifyRequest) {
  const session = request.dashboardSession;
  if (!session) {
    throw new PlatformError('forbidden', 'OAuth consent is given by a person signed in to the dashboard', {
      hint: 'Open the dashboard\'s Connections page and choose "Connect". An agent can ask a person to connect with POST /api/v1/connect/{api_id}/request.',
    });
  }
  return session;
}

/** Where the browser lands after the callback: a dashboard page saying how it went. */
function landing(publicUrl: string, outcome: ConsentOutcome): string {
  const base = publicUrl.replace(/\/+$/, '');
  const url = new URL(`${base}${outcome.returnTo ?? '/connections'}`);
  if (outcome.ok) {
    url.searchParams.set('oauth', outcome.created ? 'connected' : 'reconnected');
    url.searchParams.set('connection', outcome.connection.id);
  } else {
    url.searchParams.set('oauth', 'error');
    url.searchParams.set('reason', outcome.failure);
    if (outcome.providerError) url.searchParams.set('providerError', outcome.providerError);
    if (outcome.provider) url.searchParams.set('provider', outcome.provider);
  }
  return url.href;
}

/**
 * Managed OAuth 2 (core/oauth): consent flows from the dashboard, the platform's callback, an
 * account's labelled connections, client credentials, and an account's own OAuth apps.
 */
/**
 * A new or widened grant answers the account's pending connect requests for every API of its
 * provider whose scopes it covers (an agent waiting on one learns of it at once). The connection is
 * made either way: a failure here leaves those requests pending, and the agent's call works anyway.
 */
async function answerConnectRequests(
  request: FastifyRequest,
  accountId: string,
  connection: OAuthConnectionView,
  personId: string | null,
): Promise<void> {
  try {
    await resolveConnectRequests(
      request.server.deps.sql,
      { accountId, oauthProvider: connection.provider, oauthConnectionId: connection.id, personId, grantedScopes: connection.scopes },
      request.server.connectRequests.notices,
    );
  } catch (error) {
    request.log.warn({ err: error, provider: connection.provider }, 'pending connect requests not marked connected');
  }
}

const oauthRoutes: FastifyPluginAsyncZod = async (app) => {
  const deps = () => app.oauth.deps;

  app.post(
    '/oauth/authorize',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Start an OAuth consent flow (dashboard session only): answers the provider URL to send the person to',
        description:
          'Authorization code with PKCE (S256); the state is bound to the dashboard session that starts it and is good for 10 minutes, once. ' +
          'Name the API (its provider is connected) or the provider. Scopes default to what the API operations declare needing, else all it declares. ' +
          'With connectionId the connection is re-authorised in place (reconnect, or more scopes: incremental consent).',
        body: z.object({
          apiId: API_ID.optional(),
          provider: PROVIDER.optional(),
          label: LABEL.optional(),
          scopes: SCOPES.optional().describe('The scopes to ask for, among those the API declares'),
          connectionId: z.uuid().optional().describe('Re-authorise this connection'),
          connectRequestId: z.uuid().optional().describe("The agent's connect request this answers"),
          returnTo: z.string().max(500).optional().describe('A dashboard path to come back to (default /connections)'),
        }),
        response: {
          200: z.object({
            ok: z.literal(true),
            authorizationUrl: z.string().describe("Send the person's browser here"),
            provider: z.string(),
            label: z.string(),
            scopes: z.array(z.string()),
            expiresAt: z.string().describe('The flow must be finished by then'),
          }),
          ...errorResponses(409),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const session = requireDashboardSession(request);
      const started = await startConsent(deps(), {
        ...request.body,
        accountId: auth.accountId,
        sessionId: session.sessionId,
        personId: session.personId,
      });
      return { ok: true as const, ...started, expiresAt: started.expiresAt.toISOString() };
    },
  );

  // The platform's one redirect URI. A top-level navigation back from the provider (cross-site, so the
  // auth plugin would refuse its cookie): the session is read here and must be the one that started the flow.
  app.get('/oauth/callback', { schema: { hide: true }, config: { secretQuery: true } }, async (request, reply) => {
    const { settings, sql } = request.server.deps;
    const token = request.cookies[SESSION_COOKIE];
    const session = token ? await verifyDashboardSession(sql, settings, token).catch(() => null) : null;
    const q = request.url.indexOf('?');
    const outcome = await completeConsent(deps(), { sessionId: session?.sessionId ?? null, query: q === -1 ? '' : request.url.slice(q + 1) });
    if (!outcome.ok)
      request.log.info(
        { failure: outcome.failure, provider: outcome.provider, providerError: outcome.providerError },
        'OAuth consent did not complete',
      );
    else if (session) await answerConnectRequests(request, session.accountId, outcome.connection, session.personId ?? null);
    // The code and state are in this URL: the page it lands on must not send them on as a Referer.
    return reply
      .code(303)
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-store')
      .redirect(landing(settings.PUBLIC_URL, outcome), 303);
  });

  app.get(
    '/me/connections',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Your OAuth connections: label, status, scopes and expiry (never a token)',
        response: { 200: z.object({ ok: z.literal(true), connections: z.array(connectionSchema) }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return { ok: true as const, connections: (await listOAuthConnectionViews(request.server.deps.sql, auth.accountId)).map(presentConnection) };
    },
  );

  app.patch(
    '/me/connections/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Rename an OAuth connection or make it the default for its provider',
        params: z.object({ id: z.uuid() }),
        body: z
          .object({
            label: LABEL.optional(),
            isDefault: z.literal(true).optional().describe('Make it the default (another becomes default by choosing it)'),
          })
          .refine((b) => b.label !== undefined || b.isDefault !== undefined, { message: 'Send label or isDefault' }),
        response: { 200: z.object({ ok: z.literal(true), connection: connectionSchema }), ...errorResponses(409) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      let connection: OAuthConnectionView | undefined;
      if (request.body.label !== undefined) connection = await renameConnection(deps(), auth.accountId, request.params.id, request.body.label);
      if (request.body.isDefault) connection = await makeDefaultConnection(deps(), auth.accountId, request.params.id);
      return { ok: true as const, connection: presentConnection(connection!) };
    },
  );

  app.delete(
    '/me/connections/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Disconnect: delete an OAuth connection and revoke its tokens at the provider (RFC 7009) where it offers revocation',
        params: z.object({ id: z.uuid() }),
        response: {
          200: z.object({
            ok: z.literal(true),
            connection: connectionSchema,
            revocation: z
              .enum(['revoked', 'not_supported', 'failed'])
              .describe('What the provider did with the tokens; the connection is gone either way'),
          }),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { connection, revocation } = await disconnectOAuth(deps(), auth.accountId, request.params.id);
      return { ok: true as const, connection: presentConnection(connection), revocation };
    },
  );

  app.post(
    '/oauth/client-credentials',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Connect server to server (client credentials) with your own OAuth app for the provider',
        body: z.object({ apiId: API_ID.optional(), provider: PROVIDER.optional(), label: LABEL.optional(), scopes: SCOPES.optional() }),
        response: { 201: z.object({ ok: z.literal(true), connection: connectionSchema }), ...errorResponses(409, 502) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const connection = await connectClientCredentials(deps(), {
        ...request.body,
        accountId: auth.accountId,
        personId: request.dashboardSession?.personId ?? null,
      });
      await answerConnectRequests(request, auth.accountId, connection, auth.personId ?? null);
      return reply.code(201).send({ ok: true as const, connection: presentConnection(connection) });
    },
  );

  app.get(
    '/oauth/apps',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Your own OAuth apps (never their secrets)',
        response: { 200: z.object({ ok: z.literal(true), apps: z.array(appSchema) }) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return { ok: true as const, apps: (await listOAuthAppViews(request.server.deps.sql, { accountId: auth.accountId })).map(presentApp) };
    },
  );

  app.post(
    '/oauth/apps',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: "Bring your own OAuth app for a provider: your consent flows (and client credentials) use it instead of the operator's",
        description:
          'Register PUBLIC_URL/api/v1/oauth/callback as its redirect URI at the provider. The client secret is encrypted at rest and never returned.',
        body: z.object({
          provider: PROVIDER,
          clientId: z.string().min(1).max(512),
          clientSecret: z.string().min(1).max(4096).optional().describe('Absent for a public client (PKCE only)'),
          authorizationUrl: z.string().max(2000).optional(),
          tokenUrl: z.string().max(2000).optional(),
          revocationUrl: z.string().max(2000).optional(),
          issuer: z.string().max(2000).optional().describe('Alone: the endpoints are read from its discovery document'),
          scopes: SCOPES.optional().describe('Asked for on every consent, e.g. offline_access'),
          authorizationParams: z
            .record(z.string(), z.string())
            .optional()
            .describe('Extra authorization request parameters, e.g. {"access_type": "offline"}'),
          tokenAuthMethod: z.enum(['client_secret_basic', 'client_secret_post', 'none']).optional(),
        }),
        response: { 201: z.object({ ok: z.literal(true), app: appSchema, redirectUri: z.string() }) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const body = request.body;
      const registered = await registerOAuthApp(
        request.server.deps.sql,
        deps().clients,
        request.server.deps.settings.CONNECTIONS_MASTER_KEY,
        { accountId: auth.accountId },
        {
          provider: body.provider,
          clientId: body.clientId,
          clientSecret: body.clientSecret ?? null,
          authorizationUrl: body.authorizationUrl,
          tokenUrl: body.tokenUrl,
          revocationUrl: body.revocationUrl ?? null,
          issuer: body.issuer ?? null,
          defaultScopes: body.scopes ?? [],
          authorizationParams: body.authorizationParams ?? {},
          ...(body.tokenAuthMethod ? { tokenAuthMethod: body.tokenAuthMethod } : {}),
        },
      );
      const redirectUri = `${request.server.deps.settings.PUBLIC_URL.replace(/\/+$/, '')}/api/v1/oauth/callback`;
      return reply.code(201).send({ ok: true as const, app: presentApp(registered), redirectUri });
    },
  );

  app.delete(
    '/oauth/apps/:provider',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['oauth'],
        summary: 'Remove your own OAuth app for a provider (refused while connections made with it exist)',
        params: z.object({ provider: PROVIDER }),
        response: { 200: z.object({ ok: z.literal(true), app: appSchema }), ...errorResponses(409) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const removed = await removeOAuthApp(request.server.deps.sql, { accountId: auth.accountId }, request.params.provider);
      if (!removed) throw notFound(`Your OAuth app for ${request.params.provider}`, 'GET /api/v1/oauth/apps lists your apps.');
      return { ok: true as const, app: presentApp(removed) };
    },
  );
};

export default oauthRoutes;
