import type { FastifyInstance, InjectOptions } from 'fastify';
import { describe, expect, it } from 'vitest';
import { publishKeyChange } from '#core/identity';
import { generateKey } from '#contracts/key-format';
import { bearer, createTestAccount, expectError, type TestAccount } from './app.js';

export interface AuthCaseRoute {
  /** The app under test; called inside the generated tests, so it may be built in a beforeAll. */
  app: () => FastifyInstance;
  method: NonNullable<InjectOptions['method']>;
  /** A URL of the route; a function when it needs data made by the test (called per case with the caller's account). */
  url: string | ((caller: TestAccount) => string | Promise<string>);
  /** A valid body, so that only the credential decides the answer. */
  payload?: Record<string, unknown>;
  /** True for routes agent keys may not use (auth 'account'): an agent key then gets 403. */
  accountOnly?: boolean;
}

async function keyWithStatus(app: FastifyInstance, status: 'disabled' | 'revoked'): Promise<TestAccount> {
  const account = await createTestAccount(app.deps.sql);
  await app.deps.sql`update api_keys set status = ${status} where id = ${account.keyId}`;
  await publishKeyChange(app.deps.redis, app.deps.settings.REDIS_PREFIX, account.keyId);
  return account;
}

/**
 * Generates the common auth cases for one route: no credential 401, a wrong prefix 401, an unknown
 * (well-formed) key 401, a forged session cookie 401, a disabled key 403, a revoked key 403, and an
 * agent key 403 on account-only routes (or not refused where agent keys are allowed). Call it at
 * the top level of a test file or inside a describe.
 */
export function describeAuthCases(route: AuthCaseRoute): void {
  const send = async (caller: TestAccount, headers: Record<string, string>) => {
    const app = route.app();
    const url = typeof route.url === 'string' ? route.url : await route.url(caller);
    return app.inject({ method: route.method, url, headers, ...(route.payload === undefined ? {} : { payload: route.payload }) });
  };
  const label = `${route.method} ${typeof route.url === 'string' ? route.url : '(route)'}`;

  describe(`auth cases: ${label}`, () => {
    it('answers 401 without a credential, with a wrong prefix, an unknown key or a forged cookie', async () => {
      const caller = await createTestAccount(route.app().deps.sql);
      expectError(await send(caller, {}), 401, 'missing_credentials');
      expectError(await send(caller, bearer(`sk_live_${'a'.repeat(48)}`)), 401, 'invalid_key');
      expectError(await send(caller, { 'x-api-key': generateKey().fullKey }), 401, 'invalid_key');
      expectError(await send(caller, { cookie: 'session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.forged' }), 401, 'invalid_session');
    });

    it('answers 403 for a disabled key and for a revoked key', async () => {
      const disabled = await keyWithStatus(route.app(), 'disabled');
      expectError(await send(disabled, bearer(disabled.fullKey)), 403, 'key_disabled');
      const revoked = await keyWithStatus(route.app(), 'revoked');
      expectError(await send(revoked, bearer(revoked.fullKey)), 403, 'key_revoked');
    });

    if (route.accountOnly) {
      it('answers 403 for an agent key', async () => {
        const agent = await createTestAccount(route.app().deps.sql, { keyKind: 'agent' });
        expectError(await send(agent, bearer(agent.fullKey)), 403, 'agent_key_forbidden');
      });
    } else {
      it('accepts an agent key', async () => {
        const agent = await createTestAccount(route.app().deps.sql, { keyKind: 'agent' });
        const res = await send(agent, bearer(agent.fullKey));
        expect([401, 403], `response was ${res.statusCode}: ${res.body}`).not.toContain(res.statusCode);
      });
    }
  });
}
