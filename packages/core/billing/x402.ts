import { createHash } from 'node:crypto';
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader, HTTPFacilitatorClient } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { z } from 'zod';
import { PlatformError } from '#core/platform';
import { parseDollars } from '#contracts/money';

const optional = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === '' ? undefined : value), schema.optional());

/**
 * x402 (protocol version 2, HTTP transport): pay for one priced call with a signed payment instead
 * of the prepaid balance. Off unless X402_FACILITATOR_URL and X402_PAY_TO are set.
 */
export const x402Settings = z.object({
  /** The facilitator that verifies and settles payments (its /verify, /settle and /supported). */
  X402_FACILITATOR_URL: optional(z.string().url()),
  /** Where payments go: the operator's address on X402_NETWORK. */
  X402_PAY_TO: optional(z.string().min(3).max(200)),
  /** CAIP-2 network id; the default is Base Sepolia (a test network). */
  X402_NETWORK: z
    .string()
    .regex(/^[a-z0-9-]+:[A-Za-z0-9-]+$/, 'must be a CAIP-2 id such as eip155:8453')
    .default('eip155:84532'),
  /** The token paid in (USDC on Base Sepolia by default) and its EIP-712 name and version. */
  X402_ASSET: z.string().min(3).max(200).default('0x036CbD53842c5426634e7929541eC2318f3dCF7e'),
  X402_ASSET_NAME: z.string().default('USDC'),
  X402_ASSET_VERSION: z.string().default('2'),
  /** Price conversion: the asset's atomic units per dollar of price (USDC has 6 decimals: 1,000,000). */
  X402_ATOMIC_PER_DOLLAR: z.coerce.bigint().min(1n).default(1_000_000n),
  /** How long a payment authorization must stay valid. */
  X402_MAX_TIMEOUT_SECONDS: z.coerce.number().int().min(10).max(3600).default(120),
  X402_FACILITATOR_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(15_000),
  /**
   * The most a payer (one wallet address) may have verified and served but not yet settled, in
   * dollars: what the operator risks when the payer empties the wallet before settlement. A payment
   * with nothing else of its payer in flight is always let through.
   */
  X402_PAYER_MAX_UNSETTLED_DOLLARS: z
    .string()
    .default('1')
    .transform((value, ctx) => {
      const micros = parseDollars(value);
      if (micros === null || micros <= 0n) {
        ctx.addIssue({ code: 'custom', message: 'expected a positive dollar amount such as 1.00' });
        return z.NEVER;
      }
      return micros;
    }),
  /** How long a payer whose settlement the facilitator refused (e.g. insufficient funds) may not pay with x402. */
  X402_PAYER_COOLDOWN_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(30 * 86_400)
    .default(3600),
});
export type X402Settings = z.output<typeof x402Settings>;

export const x402Enabled = (settings: X402Settings) => Boolean(settings.X402_FACILITATOR_URL && settings.X402_PAY_TO);

/** The asset amount for a price: micro-dollars to atomic units, rounded up (never under-priced). */
export function atomicAmount(settings: X402Settings, costMicros: bigint): string {
  const scaled = costMicros * settings.X402_ATOMIC_PER_DOLLAR;
  return ((scaled + 999_999n) / 1_000_000n).toString();
}

/** What we accept for one call: the `exact` scheme on our network, in our asset, to our address. */
export function requirementsFor(settings: X402Settings, costMicros: bigint): PaymentRequirements {
  return {
    scheme: 'exact',
    network: settings.X402_NETWORK as PaymentRequirements['network'],
    asset: settings.X402_ASSET,
    amount: atomicAmount(settings, costMicros),
    payTo: settings.X402_PAY_TO ?? '',
    maxTimeoutSeconds: settings.X402_MAX_TIMEOUT_SECONDS,
    extra: { name: settings.X402_ASSET_NAME, version: settings.X402_ASSET_VERSION },
  };
}

/** The PAYMENT-REQUIRED header value (base64 JSON) for a priced resource. */
export function paymentRequiredHeader(settings: X402Settings, resourceUrl: string, costMicros: bigint, error?: string): string {
  const required: PaymentRequired = {
    x402Version: 2,
    ...(error ? { error } : {}),
    resource: { url: resourceUrl, description: 'One call to this priced route', mimeType: 'application/json' },
    accepts: [requirementsFor(settings, costMicros)],
  };
  return encodePaymentRequiredHeader(required);
}

export interface PresentedPayment {
  payload: PaymentPayload;
  /**
   * The payment's identity for replay protection: the payer's authorization nonce on its network
   * and asset when the scheme has one (EVM `exact`), else the payload in canonical form, so the same
   * signed payment re-encoded (other spacing, key order) is still the same payment.
   */
  hash: Buffer;
}

/** JSON with object keys sorted at every level. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function paymentIdentity(payload: PaymentPayload): Buffer {
  const authorization = (payload.payload as { authorization?: { nonce?: unknown; from?: unknown } }).authorization;
  const basis =
    authorization && typeof authorization.nonce === 'string'
      ? `nonce|${payload.accepted.network}|${payload.accepted.asset}|${String(authorization.from ?? '').toLowerCase()}|${authorization.nonce.toLowerCase()}`
      : `payload|${payload.accepted.network}|${payload.accepted.asset}|${canonical(payload.payload)}`;
  return createHash('sha256').update(basis).digest();
}

/** Decodes PAYMENT-SIGNATURE; a header that is not base64 JSON of a v2 payload is 400. */
export function decodePayment(header: string): PresentedPayment {
  let payload: PaymentPayload;
  try {
    payload = decodePaymentSignatureHeader(header);
  } catch {
    throw new PlatformError('validation_failed', 'PAYMENT-SIGNATURE is not a base64-encoded x402 payment payload', {
      hint: 'Build it from the PAYMENT-REQUIRED header of the 402 answer with an x402 client (x402Version 2).',
    });
  }
  if (
    typeof payload !== 'object' ||
    payload === null ||
    typeof payload.accepted !== 'object' ||
    payload.accepted === null ||
    typeof payload.payload !== 'object'
  ) {
    throw new PlatformError('validation_failed', 'PAYMENT-SIGNATURE lacks "accepted" or "payload"', {
      hint: 'Send an x402 version 2 payment payload.',
    });
  }
  return { payload, hash: paymentIdentity(payload) };
}

/** Why a payment does not match what we offered for this call, or null when it does. */
export function mismatch(payload: PaymentPayload, offered: PaymentRequirements): string | null {
  if (payload.x402Version !== 2) return `x402Version ${String(payload.x402Version)} is not supported (2 is)`;
  const accepted = payload.accepted;
  if (accepted.scheme !== offered.scheme) return `scheme ${accepted.scheme} is not offered (exact is)`;
  if (accepted.network !== offered.network) return `network ${accepted.network} is not ours (${offered.network})`;
  if (accepted.asset !== offered.asset) return `asset ${accepted.asset} is not the one asked for`;
  if (accepted.payTo !== offered.payTo) return 'payTo is not our address';
  if (accepted.amount !== offered.amount) return `amount ${accepted.amount} is not the price of this call (${offered.amount})`;
  return null;
}

export function createFacilitator(settings: X402Settings): HTTPFacilitatorClient | null {
  if (!x402Enabled(settings)) return null;
  return new HTTPFacilitatorClient({ url: settings.X402_FACILITATOR_URL!, timeoutMs: settings.X402_FACILITATOR_TIMEOUT_MS });
}
