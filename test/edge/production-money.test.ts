import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { bearer, createTestAccount, expectError, expectOk } from '../helpers/app.js';
import { TEST_PASSWORD } from '../helpers/session.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

// Production must not mint money: anyone can register, so a self-service top-up or a sign-up credit
// there is money spent on APIs the operator pays for.

const apps: FastifyInstance[] = [];
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
});

async function productionApp(overrides: Record<string, string> = {}) {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const app = await buildApp(testEdgeSettings({ NODE_ENV: 'production', ...overrides }), { logger: { level: 'warn', stream } });
  apps.push(app);
  return { app, lines };
}

const topUp = (app: FastifyInstance, fullKey: string) =>
  app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(fullKey), payload: { amount: 100 } });

describe('production billing', () => {
  it('refuses self-service top-ups when BILLING_MODE is unset, and when it says sandbox without the explicit allowance', async () => {
    for (const overrides of [{}, { BILLING_MODE: 'sandbox' }] as Record<string, string>[]) {
      const { app } = await productionApp(overrides);
      const account = await createTestAccount(app.deps.sql);
      const body = expectError(await topUp(app, account.fullKey), 403, 'live_billing');
      expect(String(body.hint)).toMatch(overrides.BILLING_MODE ? /ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION/ : /real payment/);
      const [row] = await app.deps.sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${account.accountId}`;
      expect(row!.b).toBe(0n);
    }
  });

  it('allows them only with ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION=true, and warns at start-up', async () => {
    const { app, lines } = await productionApp({ BILLING_MODE: 'sandbox', ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: 'true' });
    expect(lines.join('')).toMatch(/SANDBOX TOP-UPS ARE ON IN PRODUCTION/);
    const account = await createTestAccount(app.deps.sql);
    expect(expectOk<{ credited: number }>(await topUp(app, account.fullKey)).credited).toBe(100);
    const quiet = await productionApp();
    expect(quiet.lines.join('')).not.toMatch(/SANDBOX TOP-UPS/);
  });

  it('gives no sign-up credit in production unless one is set', async () => {
    const { app } = await productionApp();
    const register = (email: string) => app.inject({ method: 'POST', url: '/api/v1/register', payload: { email, password: TEST_PASSWORD } });
    expect(expectOk<{ balance: number }>(await register(`${uniqueId('prod')}@example.test`), 201).balance).toBe(0);
    const credited = await productionApp({ SIGNUP_CREDIT_DOLLARS: '0.50' });
    const res = await credited.app.inject({
      method: 'POST',
      url: '/api/v1/register',
      payload: { email: `${uniqueId('prod')}@example.test`, password: TEST_PASSWORD },
    });
    expect(expectOk<{ balance: number }>(res, 201).balance).toBe(0.5);
  });
});
