import { describe, expect, it } from 'vitest';
import { buildApp, edgeLogger } from '#edge/app';
import { bearer, createTestAccount } from '../helpers/app.js';
import { testEdgeSettings } from '../helpers/settings.js';

describe('request logs', () => {
  it('carry neither the key nor a proxied query string, but keep other paths and queries', async () => {
    const settings = testEdgeSettings({ LOG_LEVEL: 'info' });
    const lines: string[] = [];
    const logger = { ...(edgeLogger(settings) as object), stream: { write: (line: string) => lines.push(line) } };
    const app = await buildApp(settings, { logger });
    try {
      const account = await createTestAccount(app.deps.sql);
      const proxied = await app.inject({ method: 'GET', url: '/api/v1/proxy/no-such-api-zz/forecast?appid=caller-upstream-secret-123', headers: bearer(account.fullKey) });
      expect(proxied.statusCode, proxied.body).toBe(404);
      await app.inject({ method: 'GET', url: '/api/v1/usage?days=7', headers: bearer(account.fullKey) });
      const log = lines.join('');
      expect(log).toContain('/api/v1/proxy/no-such-api-zz/forecast?[redacted]');
      expect(log).toContain('/api/v1/usage?days=7');
      expect(log).not.toContain('caller-upstream-secret-123');
      expect(log).not.toContain(account.fullKey);
    } finally {
      await app.close();
    }
  });
});
