/**
 * Where money may come from, by deployment. Outside production the defaults make a local stack
 * usable (sandbox top-ups, a $1.00 sign-up credit). In production nothing is minted by default:
 * top-ups need a real payment (live billing), the sign-up credit is 0, and sandbox top-ups happen
 * only when BILLING_MODE=sandbox is set together with ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION=true (the
 * edge then warns at start-up), because anyone could otherwise credit themselves and spend it on
 * APIs the operator pays for.
 */
export interface BillingPolicySettings {
  NODE_ENV: 'development' | 'test' | 'production';
  BILLING_MODE?: 'sandbox' | 'live' | undefined;
  ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: boolean;
  /** Micro-dollars, when set. */
  SIGNUP_CREDIT_DOLLARS?: bigint | undefined;
}

const DEVELOPMENT_SIGNUP_CREDIT_MICROS = 1_000_000n;

export function billingMode(settings: BillingPolicySettings): 'sandbox' | 'live' {
  if (settings.NODE_ENV !== 'production') return settings.BILLING_MODE ?? 'sandbox';
  return settings.BILLING_MODE === 'sandbox' && settings.ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION ? 'sandbox' : 'live';
}

/** True when a production edge lets accounts credit themselves: worth a warning at every start. */
export function mintsMoneyInProduction(settings: BillingPolicySettings): boolean {
  return settings.NODE_ENV === 'production' && billingMode(settings) === 'sandbox';
}

export function signupCreditMicros(settings: BillingPolicySettings): bigint {
  return settings.SIGNUP_CREDIT_DOLLARS ?? (settings.NODE_ENV === 'production' ? 0n : DEVELOPMENT_SIGNUP_CREDIT_MICROS);
}
