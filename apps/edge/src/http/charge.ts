import type { FastifyReply, FastifyRequest } from 'fastify';
import { chargeCall, parseMaxCost, type ChargeReceipt, type PricedCall } from '#core/billing';
import { formatDollars } from '#contracts/money';
import { requireAuth } from '../plugins/auth.js';
import { PAYMENT_SIGNATURE } from '../plugins/x402.js';

/**
 * HTTP adapter of the charging rule (`chargeCall` in core billing): reads the caller and
 * `X-Max-Cost` from the request, charges through the edge's group commit, and sets
 * `X-Service-Cost`, `X-Service-Balance` and `X-Service-Charge-Id` on the reply. The charge is
 * recorded as usage (the proxy records its own).
 */
export async function chargeRequest(request: FastifyRequest, reply: FastifyReply, call: PricedCall): Promise<ChargeReceipt> {
  const header = request.headers['x-max-cost'];
  const maxCost = parseMaxCost(Array.isArray(header) ? '' : header);
  // Paid per call with x402 instead of the balance (see plugins/x402.ts): verified now, settled once the answer is ready.
  if (request.headers[PAYMENT_SIGNATURE] !== undefined && call.costMicros > 0n) return request.server.x402.authorize(request, reply, call, maxCost);
  const receipt = await chargeCall(request.server.charges, requireAuth(request), call, maxCost, request.server.usage, request.id);
  reply.header('X-Service-Cost', formatDollars(receipt.costMicros));
  if (receipt.chargeId !== null && receipt.balanceMicros !== null) {
    reply.header('X-Service-Balance', formatDollars(receipt.balanceMicros));
    reply.header('X-Service-Charge-Id', receipt.chargeId);
  }
  return receipt;
}
