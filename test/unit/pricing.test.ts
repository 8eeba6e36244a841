import { describe, expect, it } from 'vitest';
import { billingMode, mintsMoneyInProduction, signupCreditMicros } from '#core/billing';
import { priceOf } from '#core/gateway';

type Api = Parameters<typeof priceOf>[0];
const api = (rules: Api['pricingRules'], byokPriceMicros: bigint | null = null): Api => ({
  id: 'weather',
  name: 'Weather',
  baseUrl: 'https://api.example.com',
  authScheme: { type: 'none' },
  oauth: null,
  oauthProvider: null,
  keyDocsUrl: null,
  priceMicros: 1_000n,
  byokPriceMicros,
  pricingRules: rules,
  platformKeyEncrypted: null,
  source: 'test',
});

describe('priceOf', () => {
  it('takes the first matching rule, in the order the operator wrote them', () => {
    const weather = api([
      { method: 'POST', path: '/forecast/*', priceMicros: 9_000n },
      { method: '*', path: '/forecast/daily', priceMicros: 3_000n },
      { path: '/forecast/*', priceMicros: 2_000n },
    ]);
    expect(priceOf(weather, 'post', '/forecast/daily', false)).toBe(9_000n);
    expect(priceOf(weather, 'GET', '/forecast/daily', false)).toBe(3_000n);
    expect(priceOf(weather, 'GET', '/forecast/hourly', false)).toBe(2_000n);
    // A prefix rule is a plain prefix: "/forecast/*" does not price "/forecast" itself.
    expect(priceOf(weather, 'GET', '/forecast', false)).toBe(1_000n);
    expect(priceOf(weather, 'GET', '/other', false)).toBe(1_000n);
  });

  it('prices an exact rule and its trailing-slash spelling alike, and nothing longer', () => {
    const weather = api([{ method: 'GET', path: '/premium', priceMicros: 50_000n }]);
    expect(priceOf(weather, 'GET', '/premium', false)).toBe(50_000n);
    expect(priceOf(weather, 'GET', '/premium/', false)).toBe(50_000n);
    expect(priceOf(weather, 'GET', '/premiums', false)).toBe(1_000n);
    expect(priceOf(weather, 'HEAD', '/premium', false)).toBe(1_000n);
    expect(priceOf(api([{ path: '/', priceMicros: 7n }]), 'GET', '/', false)).toBe(7n);
  });

  it('uses the bring-your-own-key price only when no rule matched and one is set', () => {
    const weather = api([{ path: '/premium', priceMicros: 50_000n }], 200n);
    expect(priceOf(weather, 'GET', '/plain', true)).toBe(200n);
    expect(priceOf(weather, 'GET', '/plain', false)).toBe(1_000n);
    expect(priceOf(weather, 'GET', '/premium', true)).toBe(50_000n);
    expect(priceOf(api([], null), 'GET', '/plain', true)).toBe(1_000n);
    expect(priceOf(api([], 0n), 'GET', '/plain', true)).toBe(0n);
  });
});

describe('billing policy', () => {
  const settings = (over: Partial<Parameters<typeof billingMode>[0]>): Parameters<typeof billingMode>[0] => ({
    NODE_ENV: 'production',
    ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: false,
    ...over,
  });

  it('mints money in production only when sandbox top-ups are asked for and explicitly allowed', () => {
    expect(billingMode(settings({}))).toBe('live');
    expect(billingMode(settings({ BILLING_MODE: 'sandbox' }))).toBe('live');
    expect(billingMode(settings({ ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: true }))).toBe('live');
    expect(billingMode(settings({ BILLING_MODE: 'sandbox', ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: true }))).toBe('sandbox');
    expect(mintsMoneyInProduction(settings({ BILLING_MODE: 'sandbox', ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: true }))).toBe(true);
    expect(mintsMoneyInProduction(settings({ NODE_ENV: 'development', BILLING_MODE: 'sandbox' }))).toBe(false);
  });

  it('defaults to sandbox and a sign-up credit outside production, to none in production', () => {
    expect(billingMode(settings({ NODE_ENV: 'development' }))).toBe('sandbox');
    expect(billingMode(settings({ NODE_ENV: 'test', BILLING_MODE: 'live' }))).toBe('live');
    expect(signupCreditMicros(settings({ NODE_ENV: 'development' }))).toBeGreaterThan(0n);
    expect(signupCreditMicros(settings({}))).toBe(0n);
    expect(signupCreditMicros(settings({ SIGNUP_CREDIT_DOLLARS: 250_000n }))).toBe(250_000n);
    expect(signupCreditMicros(settings({ NODE_ENV: 'test', SIGNUP_CREDIT_DOLLARS: 0n }))).toBe(0n);
  });
});
