import { spawnSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { promtoolCheck, sample } from '../helpers/metrics.js';

describe('the monitoring configuration (ops/)', () => {
  it('has alert rules and a scrape configuration promtool accepts', () => {
    const rules = spawnSync('promtool', ['check', 'rules', 'ops/prometheus/alerts.yml'], { encoding: 'utf8' });
    expect(rules.status, `${rules.stdout}${rules.stderr}`).toBe(0);
    expect(rules.stdout).toMatch(/SUCCESS: [1-9]\d* rules found/);
    const config = spawnSync('promtool', ['check', 'config', '--syntax-only', 'ops/prometheus/prometheus.yml'], { encoding: 'utf8' });
    expect(config.status, `${config.stdout}${config.stderr}`).toBe(0);
  });
});

describe("the edge's Prometheus metrics", () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let apiId: string;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const status = req.url?.includes('/boom') ? 500 : req.url?.includes('/missing') ? 404 : 200;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{}');
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: uniqueId('metrics'), METRICS_PORT: '0' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.002' });
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
  });

  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${app.metrics.port}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  };

  it('serves metrics on its own port only, in a text promtool accepts', async () => {
    expect(app.metrics.port).toBeGreaterThan(0);
    const text = await scrape();
    const check = promtoolCheck(text);
    expect(check.status, check.output).toBe(0);
    expect(text).toContain('platform_nodejs_eventloop_lag_seconds');
    expect(text).toContain('platform_nodejs_gc_duration_seconds');
    expect((await rawRequest(edge, { method: 'GET', path: '/metrics' })).status).toBe(404);
  });

  it('counts metered calls by API and outcome, upstream latency, and money charged and refunded', async () => {
    const rich = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const broke = await createTestAccount(app.deps.sql, { balanceMicros: 0n });
    const call = (key: string, path: string) =>
      rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}${path}`, headers: { authorization: `Bearer ${key}` } });
    expect((await call(rich.fullKey, '/ok')).status).toBe(200);
    expect((await call(rich.fullKey, '/ok')).status).toBe(200);
    expect((await call(rich.fullKey, '/missing')).status).toBe(404);
    expect((await call(rich.fullKey, '/boom')).status).toBe(502);
    expect((await call(broke.fullKey, '/ok')).status).toBe(402);
    const text = await scrape();
    expect(promtoolCheck(text).status).toBe(0);
    expect(sample(text, 'platform_proxy_calls_total', { api: apiId, outcome: 'charged' })).toBe(2);
    expect(sample(text, 'platform_proxy_calls_total', { api: apiId, outcome: 'upstream_4xx' })).toBe(1);
    expect(sample(text, 'platform_proxy_calls_total', { api: apiId, outcome: 'upstream_5xx' })).toBe(1);
    expect(sample(text, 'platform_proxy_calls_total', { api: apiId, outcome: 'payment_required' })).toBe(1);
    expect(sample(text, 'platform_upstream_latency_seconds_count', { api: apiId })).toBe(4);
    // Four calls charged at $0.002, one of them refunded.
    expect(sample(text, 'platform_money_micros_total', { kind: 'charged' })).toBeGreaterThanOrEqual(8_000);
    expect(sample(text, 'platform_money_micros_total', { kind: 'refunded' })).toBeGreaterThanOrEqual(2_000);
    expect(sample(text, 'platform_http_request_duration_seconds_count', { route: '/api/v1/proxy/:apiId/*', status: '402' })).toBe(1);
    expect(sample(text, 'platform_credit_holds_open')).toBeGreaterThanOrEqual(0);
    // A sandbox top-up is credited money.
    const topUp = await rawRequest(edge, {
      method: 'POST',
      path: '/api/v1/balance',
      headers: { authorization: `Bearer ${rich.fullKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 2 }),
    });
    expect(topUp.status, topUp.body.toString()).toBe(200);
    expect(sample(await scrape(), 'platform_money_micros_total', { kind: 'credited' })).toBeGreaterThanOrEqual(2_000_000);
  });
});
