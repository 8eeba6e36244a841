import { describe, expect, it } from 'vitest';
import { insertStartedSession } from '#db/cookbook-sessions';
import { loadCookbooks } from '#db/cookbooks';
import { workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { createTestApi } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

const FORECAST = { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning', severity: 'severe' }] };

describe('cookbook sessions while Temporal is unreachable', () => {
  it('answers 503 to a start and leaves no half-created session, and 503 to a completion', async () => {
    const app = await createTestApp({ TEMPORAL_ADDRESS: '127.0.0.1:1', TEMPORAL_START_TIMEOUT_MS: '1000', TEMPORAL_UPDATE_TIMEOUT_MS: '1000' });
    try {
      await loadCookbooks(app.deps.sql);
      const who = await createTestAccount(app.deps.sql);
      const weather = await createTestApi(app.deps.sql, 'weather');
      const sms = await createTestApi(app.deps.sql, 'sms');
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: { ...bearer(who.fullKey), 'idempotency-key': 'k1' },
        payload: { selectedApis: { weather, sms } },
      });
      const body = expectError(res, 503, 'service_unavailable');
      expect(body.hint).toContain('Retry');
      const [row] = await app.deps.sql<{ n: number }[]>`select count(*)::int as n from cookbook_sessions where account_id = ${who.accountId}`;
      expect(row!.n).toBe(0);
      expect(
        expectOk<{ sessions: unknown[] }>(await app.inject({ method: 'GET', url: '/api/v1/cookbooks/sessions', headers: bearer(who.fullKey) }))
          .sessions,
      ).toEqual([]);

      // A session that exists answers 503 to a completion while its workflow cannot be reached.
      const sessionId = uniqueId('ses_');
      await insertStartedSession(app.deps.sql, {
        sessionId,
        accountId: who.accountId,
        cookbookId: 'weather-alert-sms',
        workflowId: workflowIdFor(sessionId),
        totalSteps: 4,
        firstStepId: 'fetch-forecast',
        selectedApis: { weather, sms },
        idempotencyKey: null,
        startedAt: new Date(),
      });
      const completion = await app.inject({
        method: 'POST',
        url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`,
        headers: bearer(who.fullKey),
        payload: { stepId: 'fetch-forecast', resultData: FORECAST },
      });
      expectError(completion, 503, 'service_unavailable');
    } finally {
      await app.close();
    }
  });
});
