import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertPublicHost } from '#core/gateway';
import { runApiCli } from '#cli/api-cli';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';
import { rawRequest, startUpstream, type RawResponse, type TestUpstream } from '../helpers/upstream.js';

describe('the proxy caches API rows in-process, evicted by operator changes', () => {
  const prefix = uniqueId('apicache');
  let apps: FastifyInstance[];
  let edges: string[];
  let upstream: TestUpstream;
  const apiId = uniqueId('cached-').toLowerCase();
  const cli = (argv: string[]) => runApiCli(argv, { ...process.env, DATABASE_URL: testDatabaseUrl(), REDIS_PREFIX: prefix });

  beforeAll(async () => {
    upstream = await startUpstream();
    // Two edge instances sharing Redis; a long TTL, so only an eviction can make a change show.
    apps = await Promise.all([0, 1].map(() => createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, API_CACHE_TTL_MS: '600000' })));
    edges = [];
    for (const app of apps) {
      await app.listen({ host: '127.0.0.1', port: 0 });
      edges.push(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    }
    await cli(['add', '--id', apiId, '--name', 'Cached', '--base-url', `${upstream.url}/base`, '--price', '0.002']);
    await until('both caches are subscribed', () => apps.every((app) => app.apiCache.live));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await upstream.close();
  });

  const cost = (res: RawResponse) => {
    expect(res.status, res.body.toString()).toBe(200);
    return res.headers['x-service-cost'];
  };

  it('serves a cached row without reading Postgres, and drops it on every instance when the CLI changes it', async () => {
    const account = await createTestAccount(apps[0]!.deps.sql, { balanceMicros: 1_000_000n });
    const call = (edge: string) => rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}/x`, headers: { 'x-api-key': account.fullKey } });
    for (const edge of edges) expect(cost(await call(edge))).toBe('0.002');

    // Changed behind the edges' backs (no announcement): the cached row still answers.
    await apps[0]!.deps.sql`update apis set price_micros = 9000 where id = ${apiId}`;
    for (const edge of edges) expect(cost(await call(edge)), 'the row comes from the cache').toBe('0.002');

    // The operator CLI announces its change: every instance reads the row afresh.
    expect(await cli(['update', '--id', apiId, '--price', '0.003'])).not.toContain('Redis unreachable');
    for (const edge of edges) {
      let seen: string | string[] | undefined;
      await until('the new price shows', async () => {
        seen = cost(await call(edge));
        return seen !== '0.002';
      });
      expect(seen).toBe('0.003');
    }
  });

  it('does not cache an unknown API, so one added later is found on its first call', async () => {
    const account = await createTestAccount(apps[0]!.deps.sql, { balanceMicros: 1_000_000n });
    const later = uniqueId('later-').toLowerCase();
    const path = `/api/v1/proxy/${later}/x`;
    const before = await rawRequest(edges[0]!, { method: 'GET', path, headers: { 'x-api-key': account.fullKey } });
    expect(before.status, before.body.toString()).toBe(404);
    await apps[0]!.deps
      .sql`insert into apis (id, name, provider, base_url, source) values (${later}, 'Later', 'example.test', ${`${upstream.url}/base`}, 'operator')`;
    const after = await rawRequest(edges[0]!, { method: 'GET', path, headers: { 'x-api-key': account.fullKey } });
    expect(after.status, after.body.toString()).toBe(200);
  });
});

describe('the upstream host check cache', () => {
  it('never caches a refusal: a private host is refused on every call', async () => {
    for (let i = 0; i < 2; i += 1) {
      await expect(assertPublicHost('localhost', 60_000)).rejects.toMatchObject({ code: 'private_upstream' });
      await expect(assertPublicHost('127.0.0.1', 60_000)).rejects.toMatchObject({ code: 'private_upstream' });
    }
  });
});
