import directoryIndexPlugin from '../plugins/directory-index.js';
import type { FastifyInstance } from 'fastify';
import apiCachePlugin from '../plugins/api-cache.js';
import gatewayPlugin from '../plugins/gateway.js';
import oauthPlugin from '../plugins/oauth.js';
import oauthRoutes from './oauth.js';
import chargesPlugin from '../plugins/charges.js';
import x402Plugin from '../plugins/x402.js';
import usagePlugin from '../plugins/usage.js';
import agentKeyRoutes from './agent-keys.js';
import balanceRoutes from './balance.js';
import connectionRoutes from './connections.js';
import sessionEventsPlugin from '../plugins/session-events.js';
import eventStreamsPlugin from '../plugins/event-streams.js';
import connectRequestsPlugin from '../plugins/connect-requests.js';
import connectRequestRoutes from './connect-requests.js';
import cookbookRoutes from './cookbooks.js';
import healthRoutes from './health.js';
import keyRoutes from './keys.js';
import memberRoutes from './members.js';
import webhookRoutes, { webhookEmitterPlugin } from './webhooks.js';
import proxyRoutes from './proxy.js';
import mcpConsentRoutes from './mcp-consent.js';
import registerRoutes from './register.js';
import accountRoutes from './account.js';
import sessionRoutes from './sessions.js';
import accountSecurityRoutes from './account-security.js';
import stripeWebhookRoutes from './stripe-webhook.js';
import usageRoutes from './usage.js';
import activityRoutes from './activity.js';
import directoryRoutes from './directory.js';
import docsRoutes from './docs.js';
import voteRoutes from './votes.js';
import firstUseRoutes from './first-use.js';
import operatorToolRoutes from './operator-tools.js';
import llmsTxtRoutes from './llms-txt.js';

/**
 * Every route module of the versioned API, one per resource of the specification. Each is mounted
 * under /api/v1 and appears in the OpenAPI document automatically.
 */
export async function registerApiRoutes(app: FastifyInstance): Promise<void> {
  await app.register(usagePlugin);
  await app.register(webhookEmitterPlugin);
  await app.register(chargesPlugin);
  await app.register(x402Plugin);
  await app.register(apiCachePlugin);
  await app.register(oauthPlugin);
  await app.register(gatewayPlugin);
  await app.register(directoryIndexPlugin);
  await app.register(sessionEventsPlugin);
  await app.register(eventStreamsPlugin);
  await app.register(connectRequestsPlugin);
  await app.register(
    async (api) => {
      await api.register(healthRoutes);
      await api.register(registerRoutes);
      await api.register(accountRoutes);
      await api.register(keyRoutes);
      await api.register(agentKeyRoutes);
      await api.register(mcpConsentRoutes);
      await api.register(memberRoutes);
      await api.register(webhookRoutes);
      await api.register(balanceRoutes);
      await api.register(connectionRoutes);
      await api.register(connectRequestRoutes);
      await api.register(oauthRoutes);
      await api.register(usageRoutes);
      await api.register(activityRoutes);
      // Encapsulated: its own raw-stream content-type parser and body limit.
      await api.register(proxyRoutes);
      await api.register(cookbookRoutes);
      await api.register(directoryRoutes);
      await api.register(docsRoutes);
      await api.register(voteRoutes);
      await api.register(firstUseRoutes);
      await api.register(operatorToolRoutes);
    },
    { prefix: '/api/v1' },
  );
  // Dashboard sessions and the llms.txt files live on the site root, outside the versioned API.
  await app.register(sessionRoutes);
  await app.register(accountSecurityRoutes);
  await app.register(stripeWebhookRoutes);
  await app.register(llmsTxtRoutes);
}
