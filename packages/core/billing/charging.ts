import type { ChargeRequest, ChargeResult } from '#db/ledger';
import type { UsageEvent } from '#db/usage';
import { formatDollars, parseDollars, toDollars } from '#contracts/money';
import type { Caller } from '#core/identity';
import { PlatformError } from '#core/platform';

export interface PricedCall {
  costMicros: bigint;
  /** What is bought: 'instructions', 'cookbook', 'doc', 'proxy'. */
  item: string;
  apiId?: string | null;
  description?: string | null;
}

export interface ChargeReceipt {
  chargeId: string | null;
  /** What the caller can still spend after the charge (see CreditReservations for a call charged from a hold). */
  balanceMicros: bigint | null;
  costMicros: bigint;
  /** The credit hold the call was charged from (its ledger row follows within a settlement), else null. */
  holdId: string | null;
}

/** Anything that commits charges: the edge's ChargeBatcher, or a plain `charge()` against the pool. */
export interface Charger {
  charge(request: ChargeRequest): Promise<ChargeResult>;
}

/** Where usage events go (the edge's UsageRecorder). */
export interface UsageSink {
  record(event: Omit<UsageEvent, 'id'>): void;
}

/**
 * The usage "API" of priced items that belong to no directory API: doc sections and cookbook
 * details show under these ids in GET /usage, so usage totals always equal the ledger's debits
 * minus refunds. (Directory ids are derived from provider domains; these two are reserved.)
 */
export const PLATFORM_USAGE_API = { doc: 'platform.docs', cookbook: 'platform.cookbooks' } as const;

export const PAYMENT_HINT =
  'Add funds with POST /api/v1/balance {"amount": 5} (or in the dashboard), or pay per call with x402 (see GET /api/v1/docs/balance-and-x402).';
/** PAYMENT_HINT as a tool caller (MCP) reads it: no route to call, no x402 (a tool call carries no payment). */
export const TOOL_PAYMENT_HINT = 'Nothing was charged. A person adds funds to the account in the dashboard (Balance); get_balance shows the balance.';

/**
 * The caller's ceiling on what one call may cost (`X-Max-Cost` over HTTP, `maxCost` in MCP), in
 * micro-dollars, or undefined when none was given. A malformed value is a 400.
 */
export function parseMaxCost(value: string | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  const maxCost = parseDollars(value);
  if (maxCost === null) {
    throw new PlatformError('validation_failed', 'X-Max-Cost must be a dollar amount such as 0.01', {
      hint: 'Use at most six decimal places.',
      tool: { error: 'maxCost must be a dollar amount such as 0.01' },
    });
  }
  return maxCost;
}

/**
 * Every charge is usage. The proxy records its own (status, bytes, latency, and the refund of a
 * failed call); any other priced item is served once paid (from the balance or with x402), so it is
 * recorded here with the charge that paid for it.
 */
export function recordPricedItem(
  usage: UsageSink,
  caller: Caller,
  call: PricedCall,
  chargeId: string | null,
  holdId: string | null = null,
  paidWith: 'balance' | 'x402' = 'balance',
  requestId: string | null = null,
): void {
  if (call.item === 'proxy') return;
  usage.record({
    accountId: caller.accountId,
    keyId: caller.keyId,
    apiId: call.apiId ?? PLATFORM_USAGE_API[call.item as keyof typeof PLATFORM_USAGE_API] ?? `platform.${call.item}`,
    item: call.item,
    status: 200,
    latencyMs: 0,
    bytesIn: 0,
    bytesOut: 0,
    costMicros: call.costMicros.toString(),
    chargeId,
    holdId,
    at: new Date().toISOString(),
    outcome: 'served',
    chargedMicros: call.costMicros.toString(),
    paidWith: call.costMicros > 0n ? paidWith : null,
    requestId,
  });
}

/**
 * What a priced call must pass before anything is charged, however it is paid (balance or x402):
 * a price above the caller's X-Max-Cost, and an API an agent key may not use, are refused.
 */
export function assertCallAllowed(caller: Caller, call: PricedCall, maxCostMicros?: bigint): void {
  if (maxCostMicros !== undefined && call.costMicros > maxCostMicros) {
    throw new PlatformError(
      'max_cost_exceeded',
      `This call costs $${formatDollars(call.costMicros)}, above your X-Max-Cost of $${formatDollars(maxCostMicros)}`,
      {
        hint: 'Nothing was charged or forwarded. Raise X-Max-Cost or drop the header to accept the price.',
        details: { cost: toDollars(call.costMicros), maxCost: toDollars(maxCostMicros) },
        tool: {
          error: `This call costs $${formatDollars(call.costMicros)}, above your maxCost of $${formatDollars(maxCostMicros)}`,
          hint: 'Nothing was charged or forwarded. Raise maxCost, or leave it out to accept the price.',
        },
      },
    );
  }
  if (call.apiId && caller.allowedApis && !caller.allowedApis.includes(call.apiId)) {
    throw new PlatformError('api_not_allowed', `This agent key may not call ${call.apiId}`, {
      hint: `The key is limited to: ${caller.allowedApis.join(', ') || '(no APIs)'}.`,
    });
  }
}

/**
 * The one charging rule for priced calls: refuses a price above the caller's ceiling and an API an
 * agent key may not use, then debits the balance atomically (with the agent key's spend limit).
 * Throws the specification's 402 (with `balance` and `cost`) when the balance is below the cost.
 * Nothing is charged when it throws.
 */
export async function chargeCall(
  charger: Charger,
  caller: Caller,
  call: PricedCall,
  maxCostMicros?: bigint,
  usage?: UsageSink,
  requestId: string | null = null,
): Promise<ChargeReceipt> {
  assertCallAllowed(caller, call, maxCostMicros);
  if (call.costMicros === 0n) return { chargeId: null, balanceMicros: null, costMicros: 0n, holdId: null };

  const result = await charger.charge({
    accountId: caller.accountId,
    costMicros: call.costMicros,
    keyId: caller.keyId,
    spendLimited: caller.spendLimited,
    apiId: call.apiId ?? null,
    item: call.item,
    description: call.description ?? null,
  });
  if (!result.ok && result.reason === 'insufficient_balance') {
    throw new PlatformError(
      'insufficient_balance',
      `Insufficient balance: this call costs $${formatDollars(result.costMicros)}, the balance is $${formatDollars(result.balanceMicros)}`,
      {
        hint: PAYMENT_HINT,
        tool: { hint: TOOL_PAYMENT_HINT },
        details: { balance: toDollars(result.balanceMicros), cost: toDollars(result.costMicros) },
      },
    );
  }
  if (!result.ok) {
    throw new PlatformError('spend_limit_exceeded', `This agent key's spend limit of $${formatDollars(result.spendLimitMicros)} would be exceeded`, {
      hint: 'Raise the limit by creating a new agent key, or use an account key.',
      details: { cost: toDollars(result.costMicros), spendLimit: toDollars(result.spendLimitMicros), spent: toDollars(result.spentMicros) },
    });
  }
  const holdId = 'holdId' in result && typeof result.holdId === 'string' ? result.holdId : null;
  if (usage) recordPricedItem(usage, caller, call, result.chargeId, holdId, 'balance', requestId);
  return { chargeId: result.chargeId, balanceMicros: result.balanceMicros, costMicros: result.costMicros, holdId };
}
