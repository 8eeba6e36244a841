import type { FastifyPluginAsync } from 'fastify';
import { applyStripeEvent, createStripe, verifyStripeEvent } from '#core/billing';
import { settleBalanceAlertState } from '#db/balance-alerts';
import { PlatformError } from '#core/platform';
import { emitAfterChange } from './webhooks.js';

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
        summary: "Stripe's webhook (checkout.session.completed, checkout.session.async_payment_succeeded, charge.refunded, charge.dispute.created); signed with Stripe-Signature",
        hide: !settings.STRIPE_WEBHOOK_SECRET,
      },
    },
    async (request) => {
      if (!stripe || !settings.STRIPE_WEBHOOK_SECRET) throw new PlatformError('not_found', 'Stripe is not configured on this deployment');
      const raw = request.body;
      if (!Buffer.isBuffer(raw)) throw new PlatformError('validation_failed', 'The body must be the JSON Stripe sent');
      const signature = request.headers['stripe-signature'];
      const event = verifyStripeEvent(stripe, raw, typeof signature === 'string' ? signature : undefined, settings.STRIPE_WEBHOOK_SECRET);
      const outcome = await applyStripeEvent(sql, settings, event);
      request.log.info({ stripeEventId: event.id, type: event.type, outcome }, 'stripe event');
      if (outcome === 'credited') {
        const session = event.data.object as { metadata?: Record<string, string> | null; amount_total?: number | null; id: string };
        const accountId = session.metadata?.accountId;
        if (accountId) {
          await settleBalanceAlertState(sql, accountId);
          await emitAfterChange(app, accountId, 'topup.succeeded', { topUpId: session.metadata?.topUpId, amount: (session.amount_total ?? 0) / 100, mode: 'live' });
        }
      }
      return { ok: true as const, received: true, outcome };
    },
  );
};

export default stripeWebhookRoutes;
