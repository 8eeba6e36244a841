import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlatformError } from '#core/platform';
import { formatDollars, parseDollars, toDollars } from '#contracts/money';
import { requireAuth } from '#edge/plugins/auth';

export interface PricedCall {
  costMicros: bigint;
  /** What is bought: 'instructions', 'cookbook', 'doc', 'proxy'. */
  item: string;
  apiId?: string | null;
  description?: string | null;
}

export interface ChargeReceipt {
  chargeId: string | null;
  balanceMicros: bigint | null;
  costMicros: bigint;
}

export const PAYMENT_HINT =
  'Add funds with POST /api/v1/balance {"amount": 5} (or in the dashboard), or pay per call with x402 (see GET /api/v1/docs/balance-and-x402).';

/**
 * The one charging mechanism for priced endpoints: checks the caller's `X-Max-Cost` and an agent
 * key's allow-list, debits the balance atomically (with the agent key's spend limit), and sets
 * `X-Service-Cost`, `X-Service-Balance` and `X-Service-Charge-Id` on the reply. Throws the
 * specification's 402 (with `balance` and `cost`) when the balance is below the cost.
 */
export async function chargeRequest(request: FastifyRequest, reply: FastifyReply, call: PricedCall): Promise<ChargeReceipt> {
  const auth = requireAuth(request);
  const maxCostHeader = request.headers['x-max-cost'];
  if (maxCostHeader !== undefined) {
    const maxCost = typeof maxCostHeader === 'string' ? parseDollars(maxCostHeader) : null;
    if (maxCost === null) {
      throw new PlatformError('validation_failed', 'X-Max-Cost must be a dollar amount such as 0.01', { hint: 'Use at most six decimal places.' });
    }
    if (call.costMicros > maxCost) {
      throw new PlatformError('max_cost_exceeded', `This call costs $${formatDollars(call.costMicros)}, above your X-Max-Cost of $${formatDollars(maxCost)}`, {
        hint: 'Nothing was charged or forwarded. Raise X-Max-Cost or drop the header to accept the price.',
        details: { cost: toDollars(call.costMicros), maxCost: toDollars(maxCost) },
      });
    }
  }
  if (call.apiId && auth.allowedApis && !auth.allowedApis.includes(call.apiId)) {
    throw new PlatformError('api_not_allowed', `This agent key may not call ${call.apiId}`, {
      hint: `The key is limited to: ${auth.allowedApis.join(', ') || '(no APIs)'}.`,
    });
  }
  if (call.costMicros === 0n) {
    reply.header('X-Service-Cost', '0');
    return { chargeId: null, balanceMicros: null, costMicros: 0n };
  }

  const result = await request.server.charges.charge({
    accountId: auth.accountId,
    costMicros: call.costMicros,
    keyId: auth.keyId,
    spendLimited: auth.spendLimited,
    apiId: call.apiId ?? null,
    item: call.item,
    description: call.description ?? null,
  });
  if (!result.ok && result.reason === 'insufficient_balance') {
    throw new PlatformError('insufficient_balance', `Insufficient balance: this call costs $${formatDollars(result.costMicros)}, the balance is $${formatDollars(result.balanceMicros)}`, {
      hint: PAYMENT_HINT,
      details: { balance: toDollars(result.balanceMicros), cost: toDollars(result.costMicros) },
    });
  }
  if (!result.ok) {
    throw new PlatformError('spend_limit_exceeded', `This agent key's spend limit of $${formatDollars(result.spendLimitMicros)} would be exceeded`, {
      hint: 'Raise the limit by creating a new agent key, or use an account key.',
      details: { cost: toDollars(result.costMicros), spendLimit: toDollars(result.spendLimitMicros), spent: toDollars(result.spentMicros) },
    });
  }
  reply.header('X-Service-Cost', formatDollars(result.costMicros));
  reply.header('X-Service-Balance', formatDollars(result.balanceMicros));
  reply.header('X-Service-Charge-Id', result.chargeId);
  return { chargeId: result.chargeId, balanceMicros: result.balanceMicros, costMicros: result.costMicros };
}
