import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevset } from '#core/directory';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { freePort } from '../helpers/ports.js';
import { testDatabaseUrl } from '../helpers/settings.js';
import { RANKING_EDGE_CASE_URLS } from '../helpers/directory-urls.js';

// The edge asking the directory ranking process (workers/directory/main.ts, started here as its own
// process, as `npm run up` and docker-compose.yml run it) instead of ranking itself.

interface Ranker {
  child: ChildProcess;
  log: () => string;
}

async function startRanker(port: number): Promise<Ranker> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/directory/main.ts'], {
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: testDatabaseUrl(),
      DIRECTORY_RANK_HOST: '127.0.0.1',
      DIRECTORY_RANK_PORT: String(port),
      // One thread: the threads' path (RankPool) inside the ranking process, at one index's cost.
      DIRECTORY_RANK_WORKERS: '1',
      // As the test apps (test/helpers/settings.ts): other tests' calls must not move the order it is compared by.
      DISCOVERY_FEEDBACK_REFRESH_SECONDS: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/health`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the ranking process did not start: ${out}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { child, log: () => out };
}

async function stopRanker(ranker: Ranker): Promise<number | null> {
  if (ranker.child.exitCode !== null) return ranker.child.exitCode;
  const exited = new Promise<number | null>((resolve) => ranker.child.once('exit', resolve));
  ranker.child.kill('SIGTERM');
  return exited;
}

let port: number;
let ranker: Ranker;
let inline: FastifyInstance;
let remote: FastifyInstance;
beforeAll(async () => {
  port = await freePort();
  ranker = await startRanker(port);
  // Without the shared Redis answer cache: every request is ranked, here or there.
  inline = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0', DIRECTORY_RANK_WORKERS: '0' });
  remote = await createTestApp({ DIRECTORY_CACHE_SECONDS: '0', DIRECTORY_RANK_URL: `http://127.0.0.1:${port}` });
}, 90_000);
afterAll(async () => {
  await Promise.all([inline?.close(), remote?.close(), ranker && stopRanker(ranker)]);
});

describe('search and discovery from the directory ranking process (DIRECTORY_RANK_URL)', () => {
  it('answers byte for byte as ranking in the edge does, errors and a caller with holdings included', { timeout: 120_000 }, async () => {
    const tasks = await loadDevset(fileURLToPath(new URL('../../docs/discovery-devset.json', import.meta.url)));
    const account = await createTestAccount(inline.deps.sql);
    // A key connected for one API that needs one: its callability differs for this caller (the holdings travel with the request).
    const found = expectOk<{ results: { api: { id: string; callability: { state: string } } }[] }>(
      await inline.inject({ method: 'GET', url: '/api/v1/discover?q=weather%20forecast&limit=50' }),
    ).results.find((r) => r.api.callability.state === 'needs_key');
    expect(found, 'an API that needs a key among the weather APIs').toBeDefined();
    const keyed = found!.api.id;
    expectOk(
      await inline.inject({
        method: 'POST',
        url: `/api/v1/connect/${keyed}`,
        headers: bearer(account.fullKey),
        payload: { apiKey: 'test-key-0123456789' },
      }),
      201,
    );
    const cursor = Buffer.from(JSON.stringify({ o: 5 })).toString('base64url');
    const urls = [
      ...['stripe', 'twillio', 'geocoding', 'amazon web services', 'weather forecast', 'qzxqvjw', 'münchen transit'].flatMap((q) => [
        `/api/v1/apis?q=${encodeURIComponent(q)}`,
        `/api/v1/apis?q=${encodeURIComponent(q)}&limit=5&cursor=${cursor}`,
        `/api/v1/apis?q=${encodeURIComponent(q)}&category=financial&limit=3`,
        `/api/v1/apis?q=${encodeURIComponent(q)}&callable=true`,
      ]),
      '/api/v1/discover?q=weather%20forecast&limit=50',
      ...tasks
        .slice(0, 30)
        .flatMap((t) => [
          `/api/v1/discover?q=${encodeURIComponent(t.q)}`,
          `/api/v1/discover?query=${encodeURIComponent(t.q)}&limit=50&callable=true`,
        ]),
      ...RANKING_EDGE_CASE_URLS,
    ];
    const strip = (body: string) => body.replace(/"requestId":"[^"]*"/, '');
    for (const url of urls) {
      for (const headers of [{}, bearer(account.fullKey)]) {
        const [a, b] = await Promise.all([inline.inject({ method: 'GET', url, headers }), remote.inject({ method: 'GET', url, headers })]);
        expect({ status: b.statusCode, type: b.headers['content-type'] }, url).toEqual({ status: a.statusCode, type: a.headers['content-type'] });
        expect(strip(b.body), url).toBe(strip(a.body));
      }
    }
    // The connected API is ready for this caller, in both answers alike (compared above).
    const mine = expectOk<{ results: { api: { id: string; callability: { state: string } } }[] }>(
      await remote.inject({ method: 'GET', url: '/api/v1/discover?q=weather%20forecast&limit=50', headers: bearer(account.fullKey) }),
    ).results.find((r) => r.api.id === keyed);
    expect(mine?.api.callability.state).toBe('ready');
  });

  /** The MCP tool `discover_apis` called on the edge that asks the ranking process. */
  const discoverTool = (fullKey: string) =>
    remote.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...bearer(fullKey), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'discover_apis', arguments: { query: 'send a text message' } } },
    });

  it('answers the MCP discover_apis tool from the ranking process', async () => {
    const account = await createTestAccount(remote.deps.sql);
    const res = await discoverTool(account.fullKey);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toContain('results');
    expect(res.body).not.toContain('"isError":true');
  });

  it('reports the ranking process in /health', async () => {
    const body = expectOk<{ checks: Record<string, string> }>(await remote.inject({ method: 'GET', url: '/api/v1/health' }));
    expect(body.checks).toEqual({ postgres: 'up', redis: 'up', temporal: 'up', directory: 'up' });
    // An edge ranking in process has no such dependency.
    expect(expectOk<{ checks: Record<string, string> }>(await inline.inject({ method: 'GET', url: '/api/v1/health' })).checks).not.toHaveProperty(
      'directory',
    );
  });

  it(
    'answers 503 with a hint while the ranking process is down, keeps serving the rest, and recovers when it is back',
    { timeout: 120_000 },
    async () => {
      expect(await stopRanker(ranker), ranker.log()).toBe(0);

      for (const url of ['/api/v1/apis?q=weather', '/api/v1/discover?q=send%20a%20text%20message']) {
        const res = await remote.inject({ method: 'GET', url });
        const body = expectError(res, 503, 'service_unavailable');
        expect(body.error).toMatch(/ranking process/);
        expect(body.hint).toMatch(/Retry/);
        expect(res.headers['retry-after']).toBe('5');
      }
      // Browsing reads Postgres, not the ranking process.
      expect(expectOk<{ apis: unknown[] }>(await remote.inject({ method: 'GET', url: '/api/v1/apis?limit=3' })).apis).toHaveLength(3);
      const health = await remote.inject({ method: 'GET', url: '/api/v1/health' });
      expect(health.statusCode).toBe(503);
      expect(JSON.parse(health.body)).toMatchObject({
        ok: false,
        status: 'degraded',
        code: 'service_unavailable',
        checks: { postgres: 'up', redis: 'up', temporal: 'up', directory: 'down' },
      });
      // The MCP tool says so in its own error shape rather than failing the session.
      const account = await createTestAccount(remote.deps.sql);
      const tool = await discoverTool(account.fullKey);
      expect(tool.statusCode, tool.body).toBe(200);
      expect(tool.body).toContain('service_unavailable');

      ranker = await startRanker(port);
      const back = expectOk<{ results: unknown[] }>(await remote.inject({ method: 'GET', url: '/api/v1/discover?q=send%20a%20text%20message' }));
      expect(back.results.length).toBeGreaterThan(0);
      expect(expectOk<{ checks: Record<string, string> }>(await remote.inject({ method: 'GET', url: '/api/v1/health' })).checks.directory).toBe('up');
    },
  );
});
