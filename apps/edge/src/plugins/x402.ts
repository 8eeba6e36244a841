import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { routeOf } from '../http/route-options.js';
import fp from 'fastify-plugin';
import { encodePaymentResponseHeader } from '@x402/core/http';
import { SettleError, VerifyError, type PaymentRequirements, type SettleResponse, type VerifyResponse } from '@x402/core/types';
import {
  assertCallAllowed,
  createFacilitator,
  decodePayment,
  mismatch,
  paymentRequiredHeader,
  recordPricedItem,
  requirementsFor,
  x402Enabled,
  type ChargeReceipt,
  type PresentedPayment,
  type PricedCall,
} from '#core/billing';
import type { Caller } from '#core/identity';
import { PlatformError } from '#core/platform';
import { formatDollars, parseDollars, toDollars } from '#contracts/money';
import { getBalance } from '#db/ledger';
import { admitX402Payer, claimX402Payment, markX402Payment, markX402Unrecorded, recordX402Settlement } from '#db/x402';

/** A verified x402 payment for the call in flight, settled in onSend once the answer is ready. */
interface PendingPayment extends PresentedPayment {
  requirements: PaymentRequirements;
  call: PricedCall;
  caller: Caller;
  payer: string | null;
  settled: boolean;
  /** The call failed on the platform's side (a thrown error: a refusal, an upstream 5xx, a timeout), as a balance-paid call is refunded. */
  failed: boolean;
  /** The ledger charge, once settled. */
  chargeId: string | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    x402: {
      enabled: boolean;
      authorize(request: FastifyRequest, reply: FastifyReply, call: PricedCall, maxCostMicros?: bigint): Promise<ChargeReceipt>;
    };
  }
  interface FastifyRequest {
    x402Payment: PendingPayment | null;
  }
}

export const PAYMENT_SIGNATURE = 'payment-signature';

/**
 * x402 version 2 on every priced route and the proxy (X402_FACILITATOR_URL and X402_PAY_TO set):
 * - a 402 of a priced route carries PAYMENT-REQUIRED (base64 JSON: x402Version 2, the resource, and
 *   `accepts` with the exact scheme, network, amount in atomic units, asset, payTo,
 *   maxTimeoutSeconds) beside the unchanged JSON body;
 * - a request with PAYMENT-SIGNATURE is, in order: checked against what we offer for this call,
 *   claimed (the same payload never pays twice), verified with the facilitator, served, settled
 *   (onSend, before a byte of the answer leaves), and answered with PAYMENT-RESPONSE. A settled
 *   payment is an `x402_credit` and the call's `charge` in one transaction.
 * Every answered call is settled, an upstream's 4xx included (it was forwarded, and a balance-paid
 * one keeps its charge); a call that fails on the platform's side (an error thrown after payment:
 * an upstream 5xx, a timeout, a refusal) is not, as a balance-paid one is refunded. A settlement that
 * fails withholds the answer (402); the work done for it is the operator's loss, bounded per payer:
 * at most X402_PAYER_MAX_UNSETTLED_DOLLARS of a payer's calls are served and not yet settled at once,
 * and a payer whose settlement the facilitator refused may not pay with x402 for
 * X402_PAYER_COOLDOWN_SECONDS (docs/decisions/x402-payer-exposure.md).
 */
export default fp(
  async function x402Plugin(app: FastifyInstance) {
    const { settings, sql } = app.deps;
    const enabled = x402Enabled(settings);
    const facilitator = createFacilitator(settings);
    app.decorateRequest('x402Payment', null);

    const resourceUrl = (request: FastifyRequest) => `${new URL(settings.PUBLIC_URL).origin}${request.url}`;
    const refuse = (request: FastifyRequest, message: string, costMicros: bigint, balanceMicros: bigint) =>
      new PlatformError('payment_invalid', message, {
        hint: 'Nothing was charged. Build a new payment from the PAYMENT-REQUIRED header of this answer, or pay from the balance (POST /api/v1/balance).',
        details: { balance: toDollars(balanceMicros), cost: toDollars(costMicros) },
        headers: { 'PAYMENT-REQUIRED': paymentRequiredHeader(settings, resourceUrl(request), costMicros, message) },
      });

    async function authorize(request: FastifyRequest, reply: FastifyReply, call: PricedCall, maxCostMicros?: bigint): Promise<ChargeReceipt> {
      const caller = request.auth;
      if (!caller) throw new PlatformError('missing_credentials', 'Authentication required');
      if (!enabled || !facilitator) {
        throw new PlatformError('validation_failed', 'This deployment does not take x402 payments', {
          hint: 'Drop the PAYMENT-SIGNATURE header and pay from the balance.',
        });
      }
      assertCallAllowed(caller, call, maxCostMicros);
      const header = request.headers[PAYMENT_SIGNATURE];
      const presented = decodePayment(typeof header === 'string' ? header : '');
      const balance = (await getBalance(sql, caller.accountId)) ?? 0n;
      const requirements = requirementsFor(settings, call.costMicros);
      const wrong = mismatch(presented.payload, requirements);
      if (wrong) throw refuse(request, `The payment does not match what this call asks for: ${wrong}`, call.costMicros, balance);
      if (balance < 0n)
        throw refuse(request, 'The account owes a refunded top-up; settle the balance before paying per call', call.costMicros, balance);
      if (!(await claimX402Payment(sql, { hash: presented.hash, accountId: caller.accountId, amountMicros: call.costMicros }))) {
        throw refuse(request, 'This payment was presented before; a payment pays for one call', call.costMicros, balance);
      }
      let verdict: VerifyResponse;
      try {
        verdict = await facilitator.verify(presented.payload, requirements);
      } catch (error) {
        // A facilitator may refuse with a non-2xx status and a verify response: that is a refusal, not an outage.
        if (!(error instanceof VerifyError)) {
          await markX402Payment(sql, presented.hash, { status: 'not_settled', reason: 'facilitator unreachable at verify' });
          throw new PlatformError('upstream_unavailable', 'The x402 facilitator could not verify the payment', {
            hint: 'Nothing was charged or settled; retry with a new payment shortly.',
            headers: { 'Retry-After': '5' },
            cause: error,
          });
        }
        verdict = {
          isValid: false,
          invalidReason: error.invalidReason ?? `refused (${error.statusCode})`,
          ...(error.payer ? { payer: error.payer } : {}),
        };
      }
      if (!verdict.isValid) {
        await markX402Payment(sql, presented.hash, { status: 'invalid', reason: verdict.invalidReason ?? 'invalid', payer: verdict.payer ?? null });
        throw refuse(request, `The facilitator refused the payment: ${verdict.invalidReason ?? 'invalid'}`, call.costMicros, balance);
      }
      // The exposure is bounded per wallet: the verified payer, else the authorization's signer, else the account.
      const from = (presented.payload.payload as { authorization?: { from?: unknown } }).authorization?.from;
      const payer = verdict.payer ?? (typeof from === 'string' && from !== '' ? from : `account:${caller.accountId}`);
      const refusal = await admitX402Payer(sql, {
        hash: presented.hash,
        payer,
        amountMicros: call.costMicros,
        maxUnsettledMicros: settings.X402_PAYER_MAX_UNSETTLED_DOLLARS,
        cooldownSeconds: settings.X402_PAYER_COOLDOWN_SECONDS,
        // An authorization older than its timeout can no longer be settled: it stops counting then.
        inFlightSeconds: settings.X402_MAX_TIMEOUT_SECONDS,
      });
      if (refusal === 'recent_settle_failure') {
        throw new PlatformError(
          'payment_invalid',
          'A payment from this wallet could not be settled lately (the facilitator refused it); it may not pay per call for now',
          {
            hint: `Nothing was charged. Pay from the balance (POST /api/v1/balance), or from this wallet again after ${settings.X402_PAYER_COOLDOWN_SECONDS} seconds.`,
            details: { balance: toDollars(balance), cost: toDollars(call.costMicros) },
            headers: { 'Retry-After': String(settings.X402_PAYER_COOLDOWN_SECONDS) },
          },
        );
      }
      if (refusal === 'unsettled_limit') {
        throw new PlatformError(
          'payment_invalid',
          `This wallet has calls served and not yet settled worth up to $${formatDollars(settings.X402_PAYER_MAX_UNSETTLED_DOLLARS)}; one more would exceed that`,
          {
            hint: 'Nothing was charged. Retry once your calls in flight have answered, or pay from the balance (POST /api/v1/balance).',
            details: { balance: toDollars(balance), cost: toDollars(call.costMicros) },
            headers: {
              'Retry-After': '1',
              'PAYMENT-REQUIRED': paymentRequiredHeader(settings, resourceUrl(request), call.costMicros, 'too much unsettled for this payer'),
            },
          },
        );
      }
      request.x402Payment = { ...presented, requirements, call, caller, payer, settled: false, failed: false, chargeId: null };
      reply.header('X-Service-Cost', formatDollars(call.costMicros));
      reply.header('X-Service-Payment', 'x402');
      return { chargeId: null, balanceMicros: null, costMicros: call.costMicros, holdId: null };
    }

    app.decorate('x402', { enabled, authorize });

    // A thrown error is the platform's failure (or refusal) after payment: not settled, as a balance-paid call is refunded.
    app.addHook('onError', async (request) => {
      if (request.x402Payment) request.x402Payment.failed = true;
    });

    // With `done`, not async: it runs on every request, and most have nothing to settle and are no 402.
    app.addHook('onSend', (request, reply, payload, done) => {
      const payment = request.x402Payment;
      if (payment) {
        settleOrWithhold(request, reply, payment, payload).then(
          (sent) => done(null, sent),
          (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
        );
        return;
      }
      // Every 402 of a priced route says how to pay with x402, beside the balance and cost in its body.
      if (
        enabled &&
        reply.statusCode === 402 &&
        routeOf(request).config.priced &&
        !reply.hasHeader('PAYMENT-REQUIRED') &&
        typeof payload === 'string'
      ) {
        const cost = (() => {
          try {
            return parseDollars(String((JSON.parse(payload) as { cost?: unknown }).cost));
          } catch {
            return null;
          }
        })();
        if (cost !== null && cost > 0n)
          reply.header('PAYMENT-REQUIRED', paymentRequiredHeader(settings, resourceUrl(request), cost, 'Insufficient balance'));
      }
      done(null, payload);
    });

    async function settleOrWithhold(request: FastifyRequest, reply: FastifyReply, payment: PendingPayment, payload: unknown): Promise<unknown> {
      if (payment.failed || reply.statusCode >= 500) {
        await markX402Payment(sql, payment.hash, { status: 'not_settled', reason: `the call failed (${reply.statusCode}); nothing was settled` });
        reply.header('X-Service-Cost', '0');
        return payload;
      }
      let settlement: SettleResponse;
      try {
        settlement = await facilitator!.settle(payment.payload, payment.requirements);
      } catch (error) {
        request.log.warn({ err: error }, 'x402 settle failed at the facilitator');
        const reason = error instanceof SettleError ? (error.errorReason ?? 'settle refused') : 'facilitator_unreachable';
        settlement = { success: false, errorReason: reason, transaction: '', network: payment.requirements.network };
      }
      // A refusal means nothing moved; no answer (a timeout, a 5xx without a verdict) leaves it open
      // whether the transfer was broadcast. The answer is withheld either way, but the caller is not
      // told that nothing was charged when that is not known (left open: docs/decisions/proxy-call-deadline-and-clawback-holds.md).
      const unknownOutcome = settlement.errorReason === 'facilitator_unreachable';
      if (!settlement.success) {
        await markX402Payment(sql, payment.hash, { status: 'settle_failed', reason: settlement.errorReason ?? 'settle failed' });
        request.log.warn({ reason: settlement.errorReason, item: payment.call.item }, 'x402 payment not settled: answer withheld');
        if (payload && typeof (payload as { destroy?: unknown }).destroy === 'function') (payload as { destroy(): void }).destroy();
        for (const name of Object.keys(reply.getHeaders())) {
          if (!name.startsWith('x-request-id') && !name.startsWith('x-ratelimit')) reply.removeHeader(name);
        }
        const balance = (await getBalance(sql, payment.caller.accountId)) ?? 0n;
        reply.code(402);
        reply.header('content-type', 'application/json; charset=utf-8');
        reply.header('X-Service-Cost', '0');
        reply.header('PAYMENT-REQUIRED', paymentRequiredHeader(settings, resourceUrl(request), payment.call.costMicros, 'settlement failed'));
        return JSON.stringify({
          ok: false,
          error: unknownOutcome
            ? 'The facilitator did not confirm the settlement (no answer in time); the answer is withheld'
            : `The payment could not be settled (${settlement.errorReason ?? 'unknown reason'}); the answer is withheld`,
          code: 'payment_invalid',
          hint: unknownOutcome
            ? 'The transfer may still land on chain: check your wallet for it before paying again. The same payment cannot be used twice; its authorization is kept here as settle_failed for an operator.'
            : 'Nothing was charged. Pay again with a new payment, or from the balance.',
          balance: toDollars(balance),
          cost: toDollars(payment.call.costMicros),
        });
      }
      let chargeId: string;
      try {
        chargeId = await recordX402Settlement(sql, {
          hash: payment.hash,
          accountId: payment.caller.accountId,
          costMicros: payment.call.costMicros,
          keyId: payment.caller.keyId,
          apiId: payment.call.apiId ?? null,
          item: payment.call.item,
          description: payment.call.description ?? null,
          transaction: settlement.transaction,
          network: settlement.network,
          payer: settlement.payer ?? payment.payer,
        });
      } catch (error) {
        // Paid at the facilitator but not written here: the payer still gets what they paid for, and
        // the payment is kept as settled_unrecorded (with its transaction) for an operator to record.
        request.log.error(
          { err: error, transaction: settlement.transaction, item: payment.call.item },
          'x402 payment settled but its ledger entries could not be written',
        );
        await markX402Unrecorded(
          sql,
          payment.hash,
          { transaction: settlement.transaction, network: settlement.network, payer: settlement.payer ?? payment.payer },
          { keyId: payment.caller.keyId, apiId: payment.call.apiId ?? null, item: payment.call.item, description: payment.call.description ?? null },
          `ledger write failed (${error instanceof Error ? error.message : String(error)}); record it with npm run payments -- x402-record`,
        ).catch(() => {});
        // It was paid on chain: the call's usage shows its cost now (a proxied call's own usage event
        // reads `settled`); its ledger pair waits for the operator.
        payment.settled = true;
        recordPricedItem(request.server.usage, payment.caller, payment.call, null, null, 'x402', request.id);
        reply.header('PAYMENT-RESPONSE', encodePaymentResponseHeader(settlement));
        return payload;
      }
      payment.settled = true;
      payment.chargeId = chargeId;
      recordPricedItem(request.server.usage, payment.caller, payment.call, chargeId, null, 'x402', request.id);
      reply.header('PAYMENT-RESPONSE', encodePaymentResponseHeader(settlement));
      reply.header('X-Service-Charge-Id', chargeId);
      return payload;
    }
  },
  { name: 'x402', dependencies: ['deps', 'usage'] },
);
