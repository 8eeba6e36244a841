import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ChargeBatcher } from '#core/billing';

declare module 'fastify' {
  interface FastifyInstance {
    charges: ChargeBatcher;
  }
}

/** Group commit of the edge's charges (see ChargeBatcher), sized by CHARGE_BATCH_MAX and CHARGE_BATCH_CONCURRENCY. */
export default fp(
  async function chargesPlugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    app.decorate('charges', new ChargeBatcher(sql, { maxBatch: settings.CHARGE_BATCH_MAX, maxInFlight: settings.CHARGE_BATCH_CONCURRENCY, log: app.log }));
  },
  { name: 'charges', dependencies: ['deps'] },
);
