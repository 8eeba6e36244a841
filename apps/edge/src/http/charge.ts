import type { FastifyReply, FastifyRequest } from 'fastify';
import { chargeCall, parseMaxCost, type ChargeReceipt, type PricedCall } from '#core/billing';
import { formatDollars } from '#contracts/money';
import { requireAuth } from '../plugins/auth.js';

/**
 * HTTP adapter of the charging rule (`chargeCall` in core billing): reads the caller and
 * `X-Max-Cost` from the request, charges through the edge's group commit, and sets
 * `X-Service-Cost`, `X-Service-Balance` and `X-Service-Charge-Id` on the reply. The charge is
 * recorded as usage (the proxy records its own).
 */
export async function chargeRequest(request: FastifyRequest, reply: FastifyReply, call: PricedCall): Promise<ChargeReceipt> {
  const header = request.headers['x-max-cost'];
  const maxCost = parseMaxCost(Array.isArray(header) ? '' : header);
  const receipt = await chargeCall(request.server.charges, requireAuth(request), call, maxCost, request.server.usage);
  reply.header('X-Service-Cost', formatDollars(receipt.costMicros));
  if (receipt.chargeId !== null && receipt.balanceMicros !== null) {
    reply.header('X-Service-Balance', formatDollars(receipt.balanceMicros));
    reply.header('X-Service-Charge-Id', receipt.chargeId);
  }
  return receipt;
}
