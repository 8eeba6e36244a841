import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { BalanceAlerts, ChargeBatcher, CreditReservations, requestAutoTopup } from '#core/billing';
import { toDollars } from '#contracts/money';
import type { ChargeRequest, ChargeResult } from '#db/ledger';

declare module 'fastify' {
  interface FastifyInstance {
    /** Where priced calls are charged: credit reservation for busy accounts, else the group commit. */
    charges: CreditReservations;
    chargeBatcher: ChargeBatcher;
    balanceAlerts: BalanceAlerts;
  }
}

/**
 * Credit reservation in front of the group commit (see CreditReservations and ChargeBatcher), sized by CHARGE_BATCH_MAX and
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
    // Every charge is seen once: by the batcher when it commits it, by the reservations when a hold pays it.
    const observe = (req: ChargeRequest, result: ChargeResult) => {
      alerts.observe(req, result);
      if (result.ok) app.metrics.money('charged', req.costMicros);
    };
    const batcher = new ChargeBatcher(sql, {
      maxBatch: settings.CHARGE_BATCH_MAX,
      maxInFlight: settings.CHARGE_BATCH_CONCURRENCY,
      log: app.log,
      observe,
    });
    const reservations = new CreditReservations(sql, batcher, {
      enabled: settings.CREDIT_RESERVATION,
      minCallsPerSecond: settings.CREDIT_HOLD_MIN_CALLS_PER_SECOND,
      sliceSeconds: settings.CREDIT_HOLD_SLICE_SECONDS,
      floorMicros: settings.CREDIT_HOLD_FLOOR_DOLLARS,
      ceilingMicros: settings.CREDIT_HOLD_CEILING_DOLLARS,
      settleEveryMs: settings.CREDIT_HOLD_SETTLE_MS,
      holdTtlSeconds: settings.CREDIT_HOLD_TTL_SECONDS,
      idleMs: settings.CREDIT_HOLD_IDLE_MS,
      log: app.log,
      observe,
    });
    app.decorate('chargeBatcher', batcher);
    app.decorate('charges', reservations);
    // The holds are settled and what they kept returned before the database goes away.
    app.addHook('onClose', async () => reservations.close());
  },
  { name: 'charges', dependencies: ['deps', 'webhook-emitter', 'metrics'] },
);
