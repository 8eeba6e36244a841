import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { BalanceAlerts, ChargeBatcher, requestAutoTopup } from '#core/billing';
import { toDollars } from '#contracts/money';

declare module 'fastify' {
  interface FastifyInstance {
    charges: ChargeBatcher;
    balanceAlerts: BalanceAlerts;
  }
}

/**
 * Group commit of the edge's charges (see ChargeBatcher), sized by CHARGE_BATCH_MAX and
 * CHARGE_BATCH_CONCURRENCY, with balance alerts watching every settled charge: `balance.low` when
 * a charge takes the balance below the account's threshold, `balance.depleted` when it reaches zero
 * or a call is refused for want of funds, each once per crossing, as webhook events.
 */
export default fp(
  async function chargesPlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    const alerts = new BalanceAlerts(
      sql,
      async (accountId, alert) => {
        if (alert.type === 'auto-topup') {
          // Queued for the workers: the request path never talks to the payment provider.
          if (await requestAutoTopup(sql, app.deps.redis, settings.REDIS_PREFIX, accountId)) app.log.info({ accountId }, 'auto top-up queued');
          return;
        }
        const data =
          alert.type === 'balance.low'
            ? { balance: toDollars(alert.balanceMicros), threshold: toDollars(alert.thresholdMicros) }
            : { balance: toDollars(alert.balanceMicros) };
        await app.webhooks.emit(accountId, alert.type, data);
        app.log.info({ accountId, type: alert.type }, 'balance alert');
      },
      (error) => app.log.error({ err: error }, 'balance alert could not be recorded'),
    );
    app.decorate('balanceAlerts', alerts);
    app.decorate(
      'charges',
      new ChargeBatcher(sql, {
        maxBatch: settings.CHARGE_BATCH_MAX,
        maxInFlight: settings.CHARGE_BATCH_CONCURRENCY,
        log: app.log,
        observe: (req, result) => alerts.observe(req, result),
      }),
    );
  },
  { name: 'charges', dependencies: ['deps', 'webhook-emitter'] },
);
