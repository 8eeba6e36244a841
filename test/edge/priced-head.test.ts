import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '#db/ledger';
import { bearer, createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';

// A HEAD request gets no body, so a priced GET must not answer HEAD (and charge) implicitly.
describe('HEAD on priced routes', () => {
  let app: FastifyInstance;
  let account: TestAccount;

  beforeAll(async () => {
    app = await createTestApp();
    await app.ready();
    account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
  });
  afterAll(async () => app.close());

  it.each(['/api/v1/apis/some-api/instructions', '/api/v1/docs/getting-started', '/api/v1/cookbooks/some-cookbook'])(
    'charges nothing for HEAD %s',
    async (url) => {
      const res = await app.inject({ method: 'HEAD', url, headers: bearer(account.fullKey) });
      expect(res.statusCode, res.body).not.toBe(200);
      expect(res.headers['x-service-cost']).toBeUndefined();
      expect(await getBalance(app.deps.sql, account.accountId)).toBe(1_000_000n);
    },
  );
});
