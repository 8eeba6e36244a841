import { describe, expect, it } from 'vitest';
import { buildApp, edgeLogger } from '#edge/app';
import { bearer, createTestAccount } from '../helpers/app.js';
import { testEdgeSettings } from '../helpers/settings.js';
import { registerApi, startUpstream } from '../helpers/upstream.js';

describe('request logs', () => {
  it('carry neither the key nor a proxied query string, but keep other paths and queries', async () => {
    const settings = testEdgeSettings({ LOG_LEVEL: 'info' });
    const lines: string[] = [];
    const logger = { ...(edgeLogger(settings) as object), stream: { write: (line: string) => lines.push(line) } };
    const app = await buildApp(settings, { logger });
    try {
      const account = await createTestAccount(app.deps.sql);
      const proxied = await app.inject({
        method: 'GET',
        url: '/api/v1/proxy/no-such-api-zz/forecast?appid=caller-upstream-secret-123',
        headers: bearer(account.fullKey),
      });
      expect(proxied.statusCode, proxied.body).toBe(404);
      // The router takes an encoded spelling of the proxy's path for the proxy (finding 12): its query is redacted too.
      const encoded = await app.inject({
        method: 'GET',
        url: '/api/v1/%70roxy/no-such-api-zz/forecast?appid=caller-upstream-secret-456',
        headers: bearer(account.fullKey),
      });
      expect(encoded.json(), encoded.body).toMatchObject({ code: 'not_found' });
      // A request no route took keeps no query either: nothing vetted it.
      await app.inject({ method: 'GET', url: '/api/v1/no-such-route?token=caller-upstream-secret-789', headers: bearer(account.fullKey) });
      await app.inject({ method: 'GET', url: '/api/v1/usage?days=7', headers: bearer(account.fullKey), remoteAddress: '198.51.100.23' });
      // A request or reply logged whole is reduced to its named fields: no header reaches a line.
      app.log.info(
        {
          req: { method: 'GET', url: '/x', headers: { authorization: 'Bearer header-secret-1', cookie: 'sid=header-secret-2' } },
          res: { statusCode: 200, headers: { 'set-cookie': 'sid=header-secret-3' } },
        },
        'whole',
      );
      const log = lines.join('');
      expect(log).toContain('/api/v1/proxy/no-such-api-zz/forecast?[redacted]');
      expect(log).toContain('/api/v1/usage?days=7');
      // The request line names the client.
      const completed = lines.map((line) => JSON.parse(line) as { msg?: string; req?: { url?: string; remoteAddress?: string } });
      expect(completed.find((line) => line.msg === 'request completed' && line.req?.url === '/api/v1/usage?days=7')?.req?.remoteAddress).toBe(
        '198.51.100.23',
      );
      expect(log).not.toContain('caller-upstream-secret-');
      expect(log).toContain('/api/v1/%70roxy/no-such-api-zz/forecast?[redacted]');
      expect(log).not.toContain(account.fullKey);
      expect(log).not.toMatch(/header-secret/);
      expect(JSON.parse(lines.at(-1)!)).toMatchObject({ req: { method: 'GET', url: '/x' }, res: { statusCode: 200 }, msg: 'whole' });
    } finally {
      await app.close();
    }
  });

  it('logs the first successful proxied calls of each second, samples the rest with LOG_REQUEST_SAMPLE, and keeps every other line', async () => {
    const upstream = await startUpstream((req, res) => {
      res.writeHead(req.url?.endsWith('/missing') ? 404 : 200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    const apiId = await registerApi({ baseUrl: `${upstream.url}/base`, price: '0.001' });
    let elapsedMs = 0;
    const run = async (sample: string, firstPerSecond = '0') => {
      const settings = testEdgeSettings({
        LOG_LEVEL: 'info',
        LOG_REQUEST_SAMPLE: sample,
        LOG_REQUEST_FIRST_PER_SECOND: firstPerSecond,
        ALLOW_PRIVATE_UPSTREAMS: 'true',
      });
      const lines: Array<{ msg?: string; req?: { url?: string }; res?: { statusCode?: number }; sample?: number }> = [];
      const logger = { ...(edgeLogger(settings) as object), stream: { write: (line: string) => lines.push(JSON.parse(line)) } };
      const app = await buildApp(settings, { logger });
      try {
        const account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
        const started = Date.now();
        for (let i = 0; i < 20; i += 1) {
          expect((await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/ok/${i}`, headers: bearer(account.fullKey) })).statusCode).toBe(200);
        }
        elapsedMs = Date.now() - started;
        expect((await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/missing`, headers: bearer(account.fullKey) })).statusCode).toBe(404);
        expect((await app.inject({ method: 'GET', url: '/api/v1/proxy/no-such-api-zz/x', headers: bearer(account.fullKey) })).statusCode).toBe(404);
        expect((await app.inject({ method: 'GET', url: '/api/v1/usage?days=7', headers: bearer(account.fullKey) })).statusCode).toBe(200);
      } finally {
        await app.close();
      }
      return lines.filter((line) => line.msg === 'request completed');
    };
    try {
      const all = await run('1');
      expect(all.filter((line) => line.req?.url?.includes('/ok'))).toHaveLength(20);
      expect(all.every((line) => line.sample === undefined)).toBe(true);

      const none = await run('0');
      expect(none.filter((line) => line.req?.url?.includes('/ok'))).toHaveLength(0);
      // The upstream's 404, the proxy's own 404 and another route's 200 are all logged.
      expect(none.map((line) => [line.req?.url, line.res?.statusCode])).toEqual([
        [`/api/v1/proxy/${apiId}/missing`, 404],
        ['/api/v1/proxy/no-such-api-zz/x', 404],
        ['/api/v1/usage?days=7', 200],
      ]);

      const half = await run('0.5');
      const kept = half.filter((line) => line.req?.url?.includes('/ok'));
      expect(kept.every((line) => line.sample === 0.5)).toBe(true);
      expect(half.filter((line) => !line.req?.url?.includes('/ok'))).toHaveLength(3);

      // The first five of each second are written whole (no "sample"), none after them at 0.
      const burst = (await run('0', '5')).filter((line) => line.req?.url?.includes('/ok'));
      expect(burst.slice(0, 5).map((line) => line.req?.url)).toEqual([0, 1, 2, 3, 4].map((n) => `/api/v1/proxy/${apiId}/ok/${n}`));
      expect(burst.every((line) => line.sample === undefined)).toBe(true);
      // (Twenty calls take well under a second here; a slower machine may open a second window.)
      expect(burst.length).toBeLessThanOrEqual(5 * Math.ceil((elapsedMs + 1) / 1000));
    } finally {
      await upstream.close();
    }
  });
});
