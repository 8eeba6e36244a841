import type { FastifyPluginAsync } from 'fastify';
import { applyStripeEvent, createStripe, settleBalanceAlertState, verifyStripeEvent } from '#core/billing';
import { PlatformError } from '#core/platform';
import { emitAfterChange } from './webhooks.js';
import { enqueueEmail } from '#core/notifications';

/**
 * POST /api/webhooks/stripe: where Stripe reports payments. The raw body is kept (the signature is
 * over its bytes) and checked with the package's constructEvent; a bad signature is 400 and changes
 * nothing. A verified event is applied once (see applyStripeEvent) and answered 200; an error is a
 * 500, so Stripe delivers it again. Without STRIPE_WEBHOOK_SECRET the route answers 404.
 */
const stripeWebhookRoutes: FastifyPluginAsync = async (app) => {
  const { settings, sql } = app.deps;
  const stripe = createStripe(settings);
  // Encapsulated: this route alone reads JSON as raw bytes.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_request, body, done) => done(null, body));

  app.post(
    '/api/webhooks/stripe',
    {
      schema: {
        tags: ['balance'],
        summary:
          "Stripe's webhook (checkout.session.completed, checkout.session.async_payment_succeeded, charge.refunded, charge.dispute.created); signed with Stripe-Signature",
        hide: !settings.STRIPE_WEBHOOK_SECRET,
      },
    },
    async (request) => {
      if (!stripe || !settings.STRIPE_WEBHOOK_SECRET) throw new PlatformError('not_found', 'Stripe is not configured on this deployment');
      const raw = request.body;
      if (!Buffer.isBuffer(raw)) throw new PlatformError('validation_failed', 'The body must be the JSON Stripe sent');
      const signature = request.headers['stripe-signature'];
      const event = verifyStripeEvent(stripe, raw, typeof signature === 'string' ? signature : undefined, settings.STRIPE_WEBHOOK_SECRET);
      const outcome = await applyStripeEvent(sql, event, stripe);
      request.log.info({ stripeEventId: event.id, type: event.type, outcome }, 'stripe event');
      const object = event.data.object as {
        metadata?: Record<string, string> | null;
        amount_total?: number | null;
        amount_received?: number | null;
        last_payment_error?: { message?: string } | null;
      };
      const accountId = object.metadata?.accountId;
      if (accountId && outcome === 'credited') {
        // Stripe amounts are in cents.
        app.metrics.money('credited', BigInt(object.amount_total ?? object.amount_received ?? 0) * 10_000n);
        await settleBalanceAlertState(sql, accountId);
        const auto = object.metadata?.purpose === 'auto-topup';
        await emitAfterChange(app, accountId, 'topup.succeeded', {
          topUpId: object.metadata?.topUpId,
          amount: (object.amount_total ?? object.amount_received ?? 0) / 100,
          mode: auto ? 'auto' : 'live',
        });
      }
      if (accountId && outcome === 'auto top-up failed') {
        const reason = object.last_payment_error?.message ?? 'the payment failed';
        await emitAfterChange(app, accountId, 'topup.failed', { topUpId: object.metadata?.topUpId, reason, mode: 'auto' });
        await enqueueEmail(app.deps.redis, settings.REDIS_PREFIX, { kind: 'topup-failed', accountId, reason }).catch((error: unknown) =>
          request.log.error({ err: error }, 'top-up failure e-mail not queued'),
        );
      }
      return { ok: true as const, received: true, outcome };
    },
  );
};

export default stripeWebhookRoutes;
