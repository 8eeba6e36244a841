import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { assertPublicHost } from '#core/gateway';
import {
  changeWebhookEndpoint,
  chooseEmailedEvents,
  createWebhookEndpoint,
  deliveryPage,
  EMAILABLE_EVENT_TYPES,
  emailPreferences as readEmailPreferences,
  enqueueDeliveries,
  listWebhooks,
  recordTestEvent,
  removeWebhookEndpoint,
  retryDelivery,
  rotateSigningSecret,
  WEBHOOK_EVENT_TYPES,
  webhookDeliveryJob,
  WebhookEmitter,
  type DeliveryRow,
  type WebhookEndpointRow,
  type WebhookEventType,
} from '#core/notifications';
import { PlatformError, createQueue } from '#core/platform';
import { requireAuth } from '../plugins/auth.js';
import { errorResponses } from './error-responses.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Records account events for their webhook endpoints and queues the deliveries. */
    webhooks: WebhookEmitter;
  }
}

const eventType = z.enum(WEBHOOK_EVENT_TYPES);
const webhookSchema = z.object({
  id: z.string(),
  url: z.string(),
  description: z.string(),
  eventTypes: z.array(eventType),
  status: z.enum(['enabled', 'disabled']),
  disabledReason: z.string().nullable().describe('Why it was disabled: by the account, or after deliveries kept failing'),
  lastSuccessAt: z.string().nullable(),
  createdAt: z.string(),
});
const deliverySchema = z.object({
  id: z.string(),
  eventId: z.string().describe('The webhook-id header: receivers deduplicate by it'),
  eventType: z.string(),
  status: z.enum(['pending', 'succeeded', 'failed']),
  attempts: z.number().int(),
  lastStatusCode: z.number().int().nullable(),
  lastError: z.string().nullable(),
  lastAttemptAt: z.string().nullable(),
  deliveredAt: z.string().nullable(),
  createdAt: z.string(),
});
const secretSchema = z.string().describe('The signing secret (whsec_...), shown in this answer only: store it now');
const idParams = z.object({ id: z.string().min(1).max(100) });

const webhookView = (row: WebhookEndpointRow) => ({
  id: row.id,
  url: row.url,
  description: row.description,
  eventTypes: row.event_types as WebhookEventType[],
  status: row.status,
  disabledReason: row.disabled_reason,
  lastSuccessAt: row.last_success_at?.toISOString() ?? null,
  createdAt: row.created_at.toISOString(),
});
const deliveryView = (row: DeliveryRow) => ({
  id: row.id,
  eventId: row.event_id,
  eventType: row.event_type,
  status: row.status,
  attempts: row.attempts,
  lastStatusCode: row.last_status_code,
  lastError: row.last_error,
  lastAttemptAt: row.last_attempt_at?.toISOString() ?? null,
  deliveredAt: row.delivered_at?.toISOString() ?? null,
  createdAt: row.created_at.toISOString(),
});

/** The emitter the routes share (key revocations, top-ups, test events). */
export const webhookEmitterPlugin = fp(
  async (app: FastifyInstance) => {
    const { sql, redis, settings } = app.deps;
    const emitter = new WebhookEmitter(sql, redis, settings.REDIS_PREFIX, settings);
    app.decorate('webhooks', emitter);
    app.addHook('onClose', async () => emitter.close());
  },
  { name: 'webhook-emitter', dependencies: ['deps'] },
);

/**
 * Emits an account event after the change it reports has been made. Best effort: the change stands
 * even when recording the event fails (logged), since undoing a revocation to keep a webhook in step
 * would be worse.
 */
export async function emitAfterChange(app: FastifyInstance, accountId: string, type: WebhookEventType, data: Record<string, unknown>): Promise<void> {
  try {
    await app.webhooks.emit(accountId, type, data);
  } catch (error) {
    app.log.error({ err: error, type }, 'webhook event not recorded, or its deliveries not queued yet (recorded ones are queued by the sweeper)');
  }
}

/**
 * /webhooks: endpoints an account registers for its events, signed per Standard Webhooks, with a
 * delivery log and manual retry. Managing them needs an account credential.
 */
const webhookRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, redis, settings } = app.deps;
  const queue = createQueue(webhookDeliveryJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX });
  app.addHook('onClose', async () => queue.close());

  /** An endpoint URL must be http(s) without credentials and, outside tests, https on a public host. */
  async function checkUrl(text: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new PlatformError('validation_failed', 'url must be an absolute URL', { hint: 'For example https://example.com/hooks/service.' });
    }
    if (url.username || url.password)
      throw new PlatformError('validation_failed', 'url must not carry credentials', { hint: 'Verify our signature instead (webhook-signature).' });
    if (url.protocol !== 'https:' && !(settings.ALLOW_PRIVATE_UPSTREAMS && url.protocol === 'http:')) {
      throw new PlatformError('validation_failed', 'url must be https', { hint: 'Webhook payloads are sent only over TLS.' });
    }
    if (!settings.ALLOW_PRIVATE_UPSTREAMS) {
      try {
        await assertPublicHost(url.hostname);
      } catch (error) {
        if (error instanceof PlatformError && error.code === 'private_upstream') {
          throw new PlatformError('validation_failed', `url's host ${url.hostname} resolves to a private, loopback or link-local address`, {
            hint: 'Webhooks go to public hosts only.',
          });
        }
        throw error;
      }
    }
    return url.toString();
  }

  const emailPreferences = z.object({
    ok: z.literal(true),
    email: z.string().describe("The owner's address the e-mails go to"),
    eventTypes: z.array(z.enum(EMAILABLE_EVENT_TYPES)),
  });

  app.get(
    '/notifications/email',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Which account events are also e-mailed to the owner (human steps and failed automatic top-ups always are)',
        response: { 200: emailPreferences, ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => {
      const preferences = await readEmailPreferences(sql, requireAuth(request).accountId);
      return { ok: true as const, email: preferences.email, eventTypes: preferences.eventTypes as (typeof EMAILABLE_EVENT_TYPES)[number][] };
    },
  );

  app.put(
    '/notifications/email',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Choose the account events also e-mailed to the owner',
        description: `Any of: ${EMAILABLE_EVENT_TYPES.join(', ')}. An empty list turns these e-mails off. The default is balance.low and balance.depleted.`,
        body: z.object({ eventTypes: z.array(z.enum(EMAILABLE_EVENT_TYPES)).max(EMAILABLE_EVENT_TYPES.length) }).strict(),
        response: { 200: emailPreferences, ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request) => {
      return { ok: true as const, ...(await chooseEmailedEvents(sql, requireAuth(request).accountId, request.body.eventTypes)) };
    },
  );

  app.post(
    '/webhooks',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Register a webhook endpoint for some event types; the signing secret is in this answer only',
        description: `Event types: ${WEBHOOK_EVENT_TYPES.join(', ')}. Payloads follow Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature headers; body { type, timestamp, data }). At most WEBHOOK_MAX_ENDPOINTS (20) per account.`,
        body: z
          .object({
            url: z.string().max(2000),
            eventTypes: z.array(eventType).min(1).max(WEBHOOK_EVENT_TYPES.length),
            description: z.string().max(200).optional(),
          })
          .strict(),
        response: {
          201: z.object({ ok: z.literal(true), webhook: webhookSchema, secret: secretSchema }),
          ...errorResponses(400, 401, 403, 409, 429),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const url = await checkUrl(request.body.url);
      const { row, secret } = await createWebhookEndpoint(sql, settings, auth.accountId, { ...request.body, url });
      return reply.code(201).send({ ok: true as const, webhook: webhookView(row), secret });
    },
  );

  app.get(
    '/webhooks',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: "The account's webhook endpoints (never their secrets)",
        response: {
          200: z.object({
            ok: z.literal(true),
            webhooks: z.array(webhookSchema),
            localUrlsAccepted: z
              .boolean()
              .describe(
                'true on test and development setups only: http and private or loopback addresses (http://localhost:8080/…) are accepted too',
              ),
          }),
          ...errorResponses(401, 403, 429),
        },
      },
    },
    async (request) => ({
      ok: true as const,
      webhooks: (await listWebhooks(sql, requireAuth(request).accountId)).map(webhookView),
      localUrlsAccepted: settings.ALLOW_PRIVATE_UPSTREAMS,
    }),
  );

  app.patch(
    '/webhooks/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Change an endpoint: url, event types, description, or enable / disable it',
        params: idParams,
        body: z
          .object({
            url: z.string().max(2000).optional(),
            eventTypes: z.array(eventType).min(1).optional(),
            description: z.string().max(200).optional(),
            enabled: z.boolean().optional(),
          })
          .strict()
          .refine((body) => Object.keys(body).length > 0, { message: 'give at least one of url, eventTypes, description, enabled' }),
        response: { 200: z.object({ ok: z.literal(true), webhook: webhookSchema }), ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { url, eventTypes, description, enabled } = request.body;
      const row = await changeWebhookEndpoint(sql, auth.accountId, request.params.id, {
        ...(url === undefined ? {} : { url: await checkUrl(url) }),
        ...(eventTypes === undefined ? {} : { eventTypes }),
        ...(description === undefined ? {} : { description }),
        ...(enabled === undefined ? {} : { enabled }),
      });
      return { ok: true as const, webhook: webhookView(row) };
    },
  );

  app.delete(
    '/webhooks/:id',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Delete an endpoint and its delivery log; nothing more is sent to it',
        params: idParams,
        response: { 200: z.object({ ok: z.literal(true), deleted: z.literal(true) }), ...errorResponses(401, 403, 404, 429) },
      },
    },
    async (request) => {
      await removeWebhookEndpoint(sql, requireAuth(request).accountId, request.params.id);
      return { ok: true as const, deleted: true as const };
    },
  );

  app.post(
    '/webhooks/:id/rotate-secret',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Replace the signing secret; for 24 hours deliveries carry signatures by both, so receivers switch without a gap',
        params: idParams,
        response: {
          200: z.object({ ok: z.literal(true), secret: secretSchema, previousSecretValidUntil: z.string() }),
          ...errorResponses(401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const rotated = await rotateSigningSecret(sql, settings.CONNECTIONS_MASTER_KEY, requireAuth(request).accountId, request.params.id);
      return { ok: true as const, secret: rotated.secret, previousSecretValidUntil: rotated.previousSecretValidUntil.toISOString() };
    },
  );

  app.post(
    '/webhooks/:id/test',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Send a webhook.test event to this endpoint (whatever types it listens to); its delivery shows in the log',
        description:
          'At most WEBHOOK_TEST_DELIVERIES_PER_HOUR (30) test deliveries per account in any hour; the next gets 429 with Retry-After (seconds until one leaves the hour).',
        params: idParams,
        response: { 202: z.object({ ok: z.literal(true), delivery: deliverySchema }), ...errorResponses(401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const delivery = await recordTestEvent(sql, auth.accountId, request.params.id, settings.WEBHOOK_TEST_DELIVERIES_PER_HOUR);
      await enqueueDeliveries(queue, settings, [delivery.id]);
      return reply.code(202).send({ ok: true as const, delivery: deliveryView(delivery) });
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: "An endpoint's delivery log, newest first",
        params: idParams,
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), cursor: z.string().min(1).max(100).optional() }),
        response: {
          200: z.object({ ok: z.literal(true), deliveries: z.array(deliverySchema), nextCursor: z.string().nullable() }),
          ...errorResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const page = await deliveryPage(sql, requireAuth(request).accountId, request.params.id, request.query);
      return { ok: true as const, deliveries: page.deliveries.map(deliveryView), nextCursor: page.nextCursor };
    },
  );

  app.post(
    '/webhooks/:id/deliveries/:deliveryId/retry',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['webhooks'],
        summary: 'Send a delivery again now (a failed one, or a succeeded one the receiver lost); same webhook-id',
        params: idParams.extend({ deliveryId: z.string().min(1).max(100) }),
        response: { 202: z.object({ ok: z.literal(true), delivery: deliverySchema }), ...errorResponses(401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const delivery = await retryDelivery(sql, requireAuth(request).accountId, request.params.id, request.params.deliveryId);
      await enqueueDeliveries(queue, settings, [delivery.id], { manualRetry: true });
      return reply.code(202).send({ ok: true as const, delivery: deliveryView(delivery) });
    },
  );
};

export default webhookRoutes;
