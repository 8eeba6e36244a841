import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertStartedSession } from '#db/cookbook-sessions';
import { loadCookbooks } from '#db/cookbooks';
import { workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectError, type TestAccount } from '../helpers/app.js';
import { openSse } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

// Event streams are bounded per account: a capped number open at once (the next gets 429 with
// Retry-After), and each closes after a maximum lifetime (clients resume with Last-Event-ID).

describe('session event streams are bounded', () => {
  let app: FastifyInstance;
  let baseUrl: string;
  let account: TestAccount;
  let path: string;

  beforeAll(async () => {
    app = await createTestApp({ REDIS_PREFIX: uniqueId('sselimit'), SSE_MAX_STREAMS_PER_ACCOUNT: '2', SSE_MAX_LIFETIME_SECONDS: '1', SSE_HEARTBEAT_MS: '200' });
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    account = await createTestAccount(app.deps.sql);
    // A session row of the account's (no workflow needed to follow its stream).
    const sessionId = uniqueId('ses_');
    await insertStartedSession(app.deps.sql, {
      sessionId,
      accountId: account.accountId,
      cookbookId: 'weather-alert-sms',
      workflowId: workflowIdFor(sessionId),
      totalSteps: 4,
      firstStepId: 'fetch-forecast',
      selectedApis: {},
      idempotencyKey: null,
      startedAt: new Date(),
    });
    path = `/api/v1/cookbooks/sessions/${sessionId}/events`;
  });
  afterAll(async () => {
    await app?.close();
  });

  it('refuses a stream past the per-account cap with 429 and Retry-After, and frees the place when one closes', async () => {
    const first = await openSse(baseUrl, path, bearer(account.fullKey));
    const second = await openSse(baseUrl, path, bearer(account.fullKey));
    const refused = await app.inject({ method: 'GET', url: path, headers: bearer(account.fullKey) });
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers['retry-after']).toBe('5');
    first.close();
    await first.ended;
    // The server sees the client go: poll until the place is free.
    await expect.poll(async () => {
      const next = await openSse(baseUrl, path, bearer(account.fullKey));
      const status = next.response.statusCode;
      next.close();
      return status;
    }, { timeout: 3_000, interval: 100 }).toBe(200);
    second.close();
  });

  it('ends a stream after its maximum lifetime', async () => {
    const started = Date.now();
    const stream = await openSse(baseUrl, path, bearer(account.fullKey));
    await stream.ended;
    const lived = Date.now() - started;
    expect(lived).toBeGreaterThanOrEqual(900);
    expect(lived).toBeLessThan(5_000);
  });
});
