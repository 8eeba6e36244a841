import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_LEAK, secretForms } from '#core/gateway';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// The trust round's findings on the metered call, each as the attacker reproduced it: the platform
// key in pieces (cut excerpts, truncated echoes, base64, Location), an MCP call that held a whole
// answer in memory, and prices dodged by letter case, path parameters and method overrides.

const PLATFORM_KEY = 'pk_live_7Hq2Zt9RwX4mLc8VbN3kYp6DsJ1fGaE5';

/** The first run of MIN_LEAK characters of any form of the key found in `text`, or null. */
function leakIn(text: string): string | null {
  for (const form of secretForms(PLATFORM_KEY)) {
    const f = form.toString('latin1');
    for (let i = 0; i + MIN_LEAK <= f.length; i += 1) if (text.includes(f.slice(i, i + MIN_LEAK))) return f.slice(i, i + MIN_LEAK);
  }
  return null;
}

/** Upstreams the way careless real APIs answer a bad request: quoting (some of) the request line. */
function echoingUpstream(req: IncomingMessage, res: ServerResponse) {
  const requestLine = `${req.method} ${req.url} HTTP/1.1`;
  const path = (req.url ?? '').split('?')[0] ?? '';
  if (path.startsWith('/page-500')) {
    // A 500 page that quotes the whole request line after a long preamble.
    res.writeHead(500, { 'content-type': 'text/html' });
    res.end(`<html><body><pre>${'x'.repeat(1_900)}</pre><p>Error processing ${requestLine}</p></body></html>`);
  } else if (path.startsWith('/truncated-400')) {
    // Quotes only the first 120 characters of the request line.
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(`Bad request: ${requestLine.slice(0, 120)}`);
  } else if (path.startsWith('/auth-echo')) {
    const auth = String(req.headers.authorization ?? '');
    res.writeHead(401, { 'content-type': 'text/plain', 'x-seen-auth': auth.slice(0, 24), 'www-authenticate': `Basic realm="${auth.slice(6, 30)}"` });
    res.end(`denied ${auth.slice(0, 30)} / ${auth.slice(10)}`);
  } else if (path.startsWith('/redirect-piece')) {
    const query = (req.url ?? '').split('?')[1] ?? '';
    res.writeHead(302, { location: `/elsewhere?was=${query.slice(0, 40)}&x=1` });
    res.end();
  } else if (path.endsWith('/limits')) {
    res.writeHead(200, { 'content-type': 'application/json', 'x-ratelimit-remaining': '42', 'x-ratelimit-limit': '60', 'x-request-id': 'up-123' });
    res.end('{}');
  } else if (path.endsWith('/redirect-relative')) {
    res.writeHead(302, { location: '/app/v1/redirect/3?x=1' });
    res.end();
  } else if (path.endsWith('/redirect-absolute')) {
    res.writeHead(301, { location: `http://${req.headers.host}/app/v1/landing` });
    res.end();
  } else if (path.endsWith('/redirect-away')) {
    res.writeHead(302, { location: 'https://elsewhere.example/page' });
    res.end();
  } else {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ method: req.method, url: req.url }));
  }
}

describe('the metered call keeps every piece of the platform key and every price', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let bigUpstream: TestUpstream;
  let queryApi: string;
  let basicApi: string;
  let pricedApi: string;
  let bigApi: string;
  let account: TestAccount;
  /** Bytes the big upstream managed to write before its socket closed, per request. */
  const bigWritten: number[] = [];

  beforeAll(async () => {
    upstream = await startUpstream(echoingUpstream);
    bigUpstream = await startUpstream((_req, res) => {
      // 64 MB, written as fast as the proxy reads it.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(64 * 1024 * 1024) });
      const chunk = Buffer.alloc(64 * 1024, 97);
      let written = 0;
      const entry = bigWritten.push(0) - 1;
      const pump = () => {
        while (written < 64 * 1024 * 1024) {
          written += chunk.length;
          bigWritten[entry] = written;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => (bigWritten[entry] = written));
      pump();
    });
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('trust3'),
      MCP_CALL_API_MAX_BODY_BYTES: String(1024 * 1024),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    queryApi = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'query:key', platformKey: PLATFORM_KEY });
    basicApi = await registerApi({ baseUrl: upstream.url, price: '0.001', auth: 'basic', platformKey: PLATFORM_KEY });
    pricedApi = await registerApi({ baseUrl: `${upstream.url}/app/v1`, price: '0.001', rules: ['GET /premium*=0.05', 'GET /report=0.02'] });
    bigApi = await registerApi({ baseUrl: bigUpstream.url, price: '0.001' });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 50_000_000n });
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
    await bigUpstream?.close();
  });

  const call = (api: string, path: string, headers: Record<string, string> = {}, method = 'GET') =>
    rawRequest(edge, { method, path: `/api/v1/proxy/${api}${path}`, headers: { authorization: `Bearer ${account.fullKey}`, ...headers } });
  const wholeAnswer = (res: { headers: Record<string, unknown>; body: Buffer }) => `${JSON.stringify(res.headers)}\n${res.body.toString('latin1')}`;

  it('keeps the key out of a 5xx excerpt however the path pads it across the cut (refunded, so free to probe)', async () => {
    // Padding moves the key across the excerpt's 2,048-byte cut, one offset after another.
    for (let pad = 0; pad < 80; pad += 7) {
      const res = await call(queryApi, `/page-500/${'p'.repeat(pad)}`);
      expect(res.status).toBe(502);
      expect(leakIn(wholeAnswer(res)), `padding ${pad}`).toBeNull();
    }
  });

  it('keeps the key out of an echo truncated anywhere in it', async () => {
    for (let pad = 40; pad < 100; pad += 3) {
      const res = await call(queryApi, `/truncated-400/${'q'.repeat(pad)}`);
      expect(res.status).toBe(400);
      expect(leakIn(wholeAnswer(res)), `padding ${pad}`).toBeNull();
    }
  });

  it('keeps the base64 of basic-auth credentials, and its pieces, out of bodies and headers', async () => {
    const res = await call(basicApi, '/auth-echo');
    expect(res.status).toBe(401);
    expect(leakIn(wholeAnswer(res))).toBeNull();
    expect(res.body.toString()).toContain('[redacted]');
  });

  it('keeps pieces of a query-borne key out of Location', async () => {
    const res = await call(queryApi, '/redirect-piece');
    expect(res.status).toBe(302);
    expect(leakIn(String(res.headers.location))).toBeNull();
  });

  it("prices what the upstream will serve: letter case, path parameters, format suffixes and method overrides don't dodge a rule", async () => {
    const costOf = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
      const res = await call(pricedApi, path, headers, method);
      return { status: res.status, cost: res.headers['x-service-cost'], body: res.body.toString() };
    };
    expect(await costOf('/premium/report')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/PREMIUM/report')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/Premium;v=1/report')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/premium%3Bv=1/report')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/report.json')).toMatchObject({ status: 200, cost: '0.02' });
    expect(await costOf('/REPORT/')).toMatchObject({ status: 200, cost: '0.02' });
    // A POST the upstream is told to serve as GET /premium.
    expect(await costOf('/premium/x', { 'x-http-method-override': 'GET' }, 'POST')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/premium/x', { 'X-HTTP-Method': 'get' }, 'POST')).toMatchObject({ status: 200, cost: '0.05' });
    expect(await costOf('/premium/x?_method=GET', {}, 'POST')).toMatchObject({ status: 200, cost: '0.05' });
    // A plain POST of the same path has no rule: the API's price.
    expect(await costOf('/premium/x', {}, 'POST')).toMatchObject({ status: 200, cost: '0.001' });
  });

  it('refuses dot segments carrying path parameters, which Tomcat, Jetty and Spring read as ..', async () => {
    // Calls earlier in this file were charged from a credit hold: their ledger rows are written first.
    await app.charges.flush();
    const before = (await app.deps.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where account_id = ${account.accountId}`)[0]!.n;
    for (const path of ['/..;/admin', '/x/..;/..;/admin', '/%2e%2e;/admin', '/.;/premium', '/x/..%3Bv=1/y', '/x/..%20/y', '/x/.../y']) {
      const res = await call(pricedApi, path);
      expect(res.status, `${path}: ${res.body.toString()}`).toBe(400);
      expect(JSON.parse(res.body.toString())).toMatchObject({ ok: false, code: 'validation_failed' });
    }
    await app.charges.flush();
    const after = (await app.deps.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where account_id = ${account.accountId}`)[0]!.n;
    expect(after).toBe(before);
    expect(upstream.seen.some((seen) => seen.url.includes('admin'))).toBe(false);
  });

  it("passes on the upstream's rate limits and request id under names of their own, beside the platform's", async () => {
    const res = await call(pricedApi, '/limits');
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream-ratelimit-remaining']).toBe('42');
    expect(res.headers['x-upstream-ratelimit-limit']).toBe('60');
    expect(res.headers['x-upstream-request-id']).toBe('up-123');
    expect(res.headers['x-request-id']).not.toBe('up-123');
  });

  it("moves the upstream's redirects into the proxy's space (relative, and absolute on its own origin); others stay", async () => {
    expect((await call(pricedApi, '/redirect-relative')).headers.location).toBe(`/api/v1/proxy/${pricedApi}/redirect/3?x=1`);
    expect((await call(pricedApi, '/redirect-absolute')).headers.location).toBe(`/api/v1/proxy/${pricedApi}/landing`);
    expect((await call(pricedApi, '/redirect-away')).headers.location).toBe('https://elsewhere.example/page');
  });

  it('answers CORS preflights without charging, and lets a page read answers made with its key', async () => {
    await app.charges.flush();
    const before = (await app.deps.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where account_id = ${account.accountId}`)[0]!.n;
    const seen = upstream.seen.length;
    const preflight = await rawRequest(edge, {
      method: 'OPTIONS',
      path: `/api/v1/proxy/${pricedApi}/premium/x`,
      headers: {
        origin: 'https://agent.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, x-custom',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('*');
    expect(String(preflight.headers['access-control-allow-methods'])).toContain('POST');
    expect(preflight.headers['access-control-allow-headers']).toBe('authorization, content-type, x-custom');
    const res = await call(pricedApi, '/limits', { origin: 'https://agent.example' });
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    await app.charges.flush();
    const after = (await app.deps.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where account_id = ${account.accountId}`)[0]!.n;
    expect(after).toBe(before + 1);
    expect(upstream.seen.length).toBe(seen + 1);
  });

  it("MCP call_api stops reading at its cap, releases the upstream and settles the call; the edge's memory does not hold the answer", async () => {
    const client = new Client({ name: 'trust-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => account.fullKey } }));
    try {
      // The peak of what this process holds in JavaScript objects and buffers while the call runs,
      // sampled every 2 ms. RSS was measured here before: it counts what the allocator and V8 keep
      // after freeing (a clean clone grew 48 MB, a loaded host 62 MB, against the answer's 64 MB),
      // so it could not tell a held answer from the memory a busy process keeps.
      global.gc?.();
      const held = () => {
        const m = process.memoryUsage();
        return m.heapUsed + m.arrayBuffers;
      };
      const heldBefore = held();
      let heldPeak = heldBefore;
      const sampler = setInterval(() => (heldPeak = Math.max(heldPeak, held())), 2);
      const result = (await client.callTool({ name: 'call_api', arguments: { apiId: bigApi, path: '/huge' } })) as CallToolResult & {
        structuredContent: {
          status: number;
          truncated: boolean;
          bodyBytes: number;
          cost: number;
          chargeId: string | null;
          bodyBase64?: string;
          body?: string;
        };
      };
      expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 300)).toBe(false);
      clearInterval(sampler);
      heldPeak = Math.max(heldPeak, held());
      const out = result.structuredContent;
      expect(out).toMatchObject({ status: 200, truncated: true, bodyBytes: 64 * 1024 * 1024, cost: 0.001 });
      expect((out.body ?? out.bodyBase64 ?? '').length).toBeGreaterThan(0);
      // The upstream's socket was closed long before its 64 MB were written.
      await expect.poll(() => bigWritten.at(-1) ?? 0, { timeout: 5_000 }).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(bigWritten.at(-1)!).toBeLessThan(32 * 1024 * 1024);
      // Nothing held the answer whole: at no sample did the heap and buffers (the upstream's
      // included, as it runs in this process, and garbage not yet collected) grow by half of it.
      expect(heldPeak - heldBefore).toBeLessThan(32 * 1024 * 1024);
      // Charged once (a charge from a credit hold gets its ledger row at the next settlement).
      await app.usage.flush();
      await app.charges.flush();
      const [charge] = await app.deps.sql<
        { n: number }[]
      >`select count(*)::int as n from ledger_entries where id = ${out.chargeId} and kind = 'charge'`;
      expect(charge!.n).toBe(1);
    } finally {
      await client.close();
    }
  });
});
