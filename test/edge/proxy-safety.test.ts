import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestAccount, createTestApp, expectError, type TestAccount } from '../helpers/app.js';
import { loginUser, registerUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type RawResponse, type TestUpstream } from '../helpers/upstream.js';

// The money path as an attacker would try it: the operator's platform key must not reach the caller
// in any form, a price must not depend on how the path is spelled, and the proxy must not act as a
// same-origin page of the dashboard.

const PLATFORM_KEY = 'plat-Secret-9f8e7d6c5b4a';

/** An upstream that quotes the key it was sent, the way careless real APIs do. */
function leakyUpstream(req: IncomingMessage, res: ServerResponse) {
  const path = (req.url ?? '').split('?')[0] ?? '';
  const key = String(req.headers['x-api-key'] ?? new URL(req.url ?? '/', 'http://x').searchParams.get('apikey') ?? '');
  const quote = Buffer.from(`{"error":"invalid key ${key}","accept":"${String(req.headers['accept-encoding'] ?? '')}"}`);
  // These answer compressed whatever the request asked for.
  if (path === '/gzip') {
    res.writeHead(401, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(gzipSync(quote));
  } else if (path === '/deflate') {
    res.writeHead(401, { 'content-type': 'application/json', 'content-encoding': 'deflate' });
    res.end(deflateSync(quote));
  } else if (path === '/br') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'br' });
    res.end(brotliCompressSync(quote));
  } else if (path === '/compress') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'compress' });
    res.end(quote);
  } else if (path === '/gzip-5xx') {
    res.writeHead(500, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(gzipSync(quote));
  } else if (path === '/headers') {
    res.writeHead(401, {
      'content-type': 'text/plain',
      'x-debug-auth': `key=${key}`,
      'www-authenticate': `ApiKey realm="x", error="invalid key ${encodeURIComponent(key)}"`,
      'set-cookie': `k=${key}`,
    });
    res.end('no');
  } else if (path === '/redirect') {
    res.writeHead(302, { location: `https://upstream.example${req.url}`, 'content-location': `${req.url}` });
    res.end();
  } else {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url, accept: req.headers['accept-encoding'] ?? null }));
  }
}

describe('the proxy keeps the platform key, prices and the dashboard safe', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let headerApi: string;
  let queryApi: string;
  let pricedApi: string;
  let account: TestAccount;

  beforeAll(async () => {
    upstream = await startUpstream(leakyUpstream);
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: uniqueId('proxysafe') });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    headerApi = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'header:X-Api-Key', platformKey: PLATFORM_KEY });
    queryApi = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'query:apikey', platformKey: PLATFORM_KEY });
    pricedApi = await registerApi({ baseUrl: upstream.url, price: '0.001', rules: ['GET /v1/premium/x=0.05'] });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 5_000_000n });
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
  });

  const call = (api: string, path: string, headers: Record<string, string> = {}) =>
    rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${api}${path}`, headers: { authorization: `Bearer ${account.fullKey}`, ...headers } });
  /** Everything the caller received, decoded as a browser or curl --compressed would. */
  const everything = (res: RawResponse) => {
    const encoding = String(res.headers['content-encoding'] ?? '');
    const body = encoding === 'gzip' ? gunzipSync(res.body) : res.body;
    return `${JSON.stringify(res.headers)}\n${body.toString('utf8')}\n${res.body.toString('latin1')}`;
  };
  const leaksNothing = (res: RawResponse) => {
    const seen = everything(res);
    expect(seen).not.toContain(PLATFORM_KEY);
    expect(seen).not.toContain(encodeURIComponent(PLATFORM_KEY));
  };

  it('asks the upstream for an uncompressed answer on platform-key calls', async () => {
    const res = await call(headerApi, '/plain', { 'accept-encoding': 'gzip, br' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString()).accept).toBe('identity');
  });

  it('reads gzip, deflate and br answers before redacting them, whatever the caller accepts', async () => {
    for (const path of ['/gzip', '/deflate', '/br']) {
      const res = await call(headerApi, path, { 'accept-encoding': 'gzip, deflate, br' });
      leaksNothing(res);
      expect(res.headers['content-encoding'], path).toBeUndefined();
      expect(res.body.toString(), path).toContain('invalid key [redacted]');
    }
    const failed = await call(headerApi, '/gzip-5xx', { 'accept-encoding': 'gzip' });
    expect(failed.status).toBe(502);
    leaksNothing(failed);
    expect(JSON.parse(failed.body.toString()).upstream.body).toContain('[redacted]');
  });

  it('refunds and refuses (502) an answer in an encoding it cannot read, rather than pass it on unread', async () => {
    const res = await call(headerApi, '/compress');
    const body = expectError({ statusCode: res.status, body: res.body.toString() }, 502, 'upstream_error');
    expect(body.refundId).toEqual(expect.any(String));
    leaksNothing(res);
  });

  it('redacts the key from every response header', async () => {
    const res = await call(headerApi, '/headers');
    expect(res.status).toBe(401);
    leaksNothing(res);
    expect(res.headers['x-debug-auth']).toBe('key=[redacted]');
    expect(res.headers['www-authenticate']).toContain('[redacted]');
  });

  it('strips a query-borne key from redirects built from the request URL', async () => {
    const res = await call(queryApi, '/redirect?page=2');
    expect(res.status).toBe(302);
    leaksNothing(res);
    expect(res.headers.location).toBe('https://upstream.example/redirect?page=2');
    expect(res.headers['content-location']).toBe('/redirect?page=2');
  });

  it('prices the canonical path and forwards exactly that path', async () => {
    const balance = async () => (await app.deps.sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${account.accountId}`)[0]!.b;
    const cases: [string, string, string][] = [
      ['/v1/premium/x', '/v1/premium/x', '0.05'],
      ['/v1/%70remium/x', '/v1/premium/x', '0.05'],
      ['/v1/%70%72emium/%78', '/v1/premium/x', '0.05'],
      ['/v1/premium/x/', '/v1/premium/x/', '0.05'],
      ['/v1/other/%7e%2a', '/v1/other/~%2A', '0.001'],
      ['/v1/other/%7E%2A', '/v1/other/~%2A', '0.001'],
    ];
    for (const [sent, forwarded, cost] of cases) {
      const before = await balance();
      const res = await call(pricedApi, sent);
      expect(res.status, `${sent}: ${res.body.toString()}`).toBe(200);
      expect(res.headers['x-service-cost'], sent).toBe(cost);
      expect(JSON.parse(res.body.toString()).path, sent).toBe(forwarded);
      expect(before - (await balance()), sent).toBe(BigInt(Math.round(Number(cost) * 1e6)));
    }
    // Escaped slashes stay refused, as before, and cost nothing.
    expectError(await asResponse(call(pricedApi, '/v1/premium%2Fx')), 400, 'validation_failed');
  });

  it('refuses the dashboard cookie (401 with a hint) and marks every proxied answer as sandboxed, errors included', async () => {
    const user = await registerUser(app);
    const session = await loginUser(app, user);
    const cookieOnly = await rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${pricedApi}/v1/other`, headers: { cookie: session.cookie } });
    const refused = expectError({ statusCode: cookieOnly.status, body: cookieOnly.body.toString() }, 401, 'missing_credentials');
    expect(String(refused.error)).toMatch(/API keys only/);
    expect(String(refused.hint)).toMatch(/cookie is not accepted/);
    for (const res of [cookieOnly, await call(pricedApi, '/v1/other'), await call('no-such-api', '/x'), await call(headerApi, '/compress')]) {
      expect(res.headers['content-security-policy']).toBe("sandbox; default-src 'none'");
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['cross-origin-resource-policy']).toBe('same-site');
    }
  });

  async function asResponse(pending: Promise<RawResponse>) {
    const res = await pending;
    return { statusCode: res.status, body: res.body.toString() };
  }
});
