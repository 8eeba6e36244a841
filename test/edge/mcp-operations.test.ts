import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCookbooks } from '#db/cookbooks';
import { createTestAccount, createTestApp } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';

// Tools converted off `app.inject`: each runs its route's operation in-process (mcp/dispatch.ts
// runOperation), with the route's price, maxCost check and rate limits. Calls of `app.inject` are
// counted by a wrapper around the app's own method, so a tool that still went through the route
// by inject would show here.

const KEY_LIMIT = 12;

function toolError(result: CallToolResult): Record<string, unknown> & { status: number; code: string } {
  expect(result.isError, JSON.stringify(result)).toBe(true);
  const text = result.content.find((block) => block.type === 'text') as { text: string };
  return JSON.parse(text.text) as Record<string, unknown> & { status: number; code: string };
}

function ok<T>(result: CallToolResult): T {
  expect(result.isError ?? false, JSON.stringify(result.content).slice(0, 600)).toBe(false);
  return result.structuredContent as T;
}

describe('MCP tools that run their route operation in-process', () => {
  let app: FastifyInstance;
  let edge: string;
  let injected = 0;
  const clients: Client[] = [];

  async function connect(key: string): Promise<Client> {
    const client = new Client({ name: 'mcp-operations-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => key } }));
    clients.push(client);
    return client;
  }
  const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }) as Promise<CallToolResult>;
  const rest = (path: string, key: string) => fetch(`${edge}${path}`, { headers: { authorization: `Bearer ${key}` } });

  /** A priced section, as the free list says (no section slug is assumed). */
  async function pricedSection(client: Client): Promise<{ slug: string; price: number }> {
    const { docs } = ok<{ docs: { slug: string; price: number }[] }>(await call(client, 'list_docs'));
    const priced = docs.find((doc) => doc.price > 0);
    if (!priced) throw new Error(`no priced doc section in ${JSON.stringify(docs)}`);
    return priced;
  }

  beforeAll(async () => {
    app = await createTestApp({ REDIS_PREFIX: uniqueId('mcpop'), RATE_LIMIT_KEY_MAX: String(KEY_LIMIT), RATE_LIMIT_KEY_WINDOW_SECONDS: '300' });
    const inject = app.inject.bind(app);
    app.inject = ((...args: Parameters<typeof inject>) => {
      injected += 1;
      return inject(...args);
    }) as typeof app.inject;
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await app?.close();
  });

  it('get_doc charges the section price, answers the route body, and is refused above maxCost', async () => {
    const agent = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const client = await connect(agent.fullKey);
    const before = injected;
    const section = await pricedSection(client);

    const refused = toolError(await call(client, 'get_doc', { slug: section.slug, maxCost: section.price / 2 }));
    expect(refused).toMatchObject({ status: 409, code: 'max_cost_exceeded', hint: expect.any(String) });
    expect(ok<{ balance: number }>(await call(client, 'get_balance')).balance).toBe(1);

    const read = await call(client, 'get_doc', { slug: section.slug, maxCost: section.price });
    const body = ok<{ ok: true; doc: { slug: string; content: string } }>(read);
    expect(body.doc.slug).toBe(section.slug);
    const balanceAfter = Math.round((1 - section.price) * 1e6) / 1e6;
    expect(read._meta?.['agent-api-platform/charge']).toEqual({ cost: section.price, balance: balanceAfter, chargeId: expect.any(String) });
    expect(ok<{ balance: number }>(await call(client, 'get_balance')).balance).toBe(balanceAfter);
    expect(injected - before, 'tools called app.inject').toBe(0);

    // The same body as the REST route answers (which charges again).
    const response = await rest(`/api/v1/docs/${section.slug}`, agent.fullKey);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(body);
    expect(toolError(await call(client, 'get_doc', { slug: uniqueId('missing-') }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('names the bad argument in a validation error', async () => {
    const agent = await createTestAccount(app.deps.sql);
    const client = await connect(agent.fullKey);
    const before = injected;
    const noQuery = toolError(await call(client, 'search_docs', {}));
    expect(noQuery).toMatchObject({ status: 400, code: 'validation_failed', hint: expect.any(String) });
    expect(noQuery.error).toMatch(/^Invalid arguments: q: /);
    const badDays = toolError(await call(client, 'get_usage', { days: 0 }));
    expect(badDays).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(badDays.error).toContain('days: days must be at least 1');
    expect(ok<{ days: number }>(await call(client, 'get_usage')).days).toBe(30);
    expect(ok<{ results: { slug: string }[] }>(await call(client, 'search_docs', { q: 'Retry-After' })).results.length).toBeGreaterThan(0);
    expect(injected - before, 'tools called app.inject').toBe(0);
  });

  it('counts get_doc against the key rate limit shared with the REST route; a refused call is not charged', async () => {
    const agent = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const client = await connect(agent.fullKey);
    const before = injected;
    const section = await pricedSection(client);
    let served = 0;
    let limited: ReturnType<typeof toolError> | null = null;
    for (let i = 0; i < KEY_LIMIT + 2 && !limited; i++) {
      const result = await call(client, 'get_doc', { slug: section.slug });
      if (result.isError) limited = toolError(result);
      else served += 1;
    }
    expect(limited).toMatchObject({ status: 429, code: 'rate_limited', retryAfter: expect.any(Number) });
    // The MCP messages of connecting and listing count too, so fewer than KEY_LIMIT reads get through.
    expect(served).toBeGreaterThan(0);
    expect(served).toBeLessThan(KEY_LIMIT);
    // The REST route spends the same budget: it is refused too.
    expect((await rest(`/api/v1/docs/${section.slug}`, agent.fullKey)).status).toBe(429);
    const [row] = await app.deps.sql<{ balance_micros: bigint }[]>`select balance_micros from accounts where id = ${agent.accountId}`;
    expect(row!.balance_micros).toBe(1_000_000n - BigInt(Math.round(section.price * 1e6)) * BigInt(served));
    expect(injected - before, 'tools called app.inject').toBe(0);
  });

  it('runs the directory and cookbook tools without app.inject, answering what their REST routes answer', async () => {
    await loadCookbooks(app.deps.sql);
    const agent = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    const client = await connect(agent.fullKey);
    const before = injected;

    const searched = ok<{ apis: { id: string }[] }>(await call(client, 'search_apis', { q: 'weather', limit: 2 }));
    expect(searched.apis.length).toBeGreaterThan(0);
    const apiId = searched.apis[0]!.id;
    const detail = ok<{ api: { id: string } }>(await call(client, 'get_api', { id: apiId }));
    expect(detail.api.id).toBe(apiId);
    const instructions = await call(client, 'get_api_instructions', { id: apiId, maxCost: 0.01 });
    expect(ok<{ apiId: string; format: string }>(instructions)).toMatchObject({ apiId, format: 'markdown' });
    expect(instructions._meta?.['agent-api-platform/charge']).toEqual({ cost: 0.01, balance: 0.99, chargeId: expect.any(String) });
    const cookbook = await call(client, 'get_cookbook', { id: 'weather-alert-sms', maxCost: 0.005 });
    expect(ok<{ cookbook: { id: string } }>(cookbook).cookbook.id).toBe('weather-alert-sms');
    expect(cookbook._meta?.['agent-api-platform/charge']).toEqual({ cost: 0.005, balance: 0.985, chargeId: expect.any(String) });
    // A header argument is checked with the route's header schema, and the error names the argument.
    const badKey = toolError(
      await call(client, 'start_cookbook', { id: 'weather-alert-sms', selectedApis: { weather: apiId }, idempotencyKey: 'has a space' }),
    );
    expect(badKey).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(badKey.error).toMatch(/^Invalid arguments: idempotencyKey: /);
    expect(ok<{ sessions: unknown[] }>(await call(client, 'list_sessions')).sessions).toEqual([]);
    expect(injected - before, 'tools called app.inject').toBe(0);

    // The same bodies as the REST routes.
    expect(await (await rest('/api/v1/apis?q=weather&limit=2', agent.fullKey)).json()).toEqual(searched);
    expect(await (await rest(`/api/v1/apis/${apiId}`, agent.fullKey)).json()).toEqual(detail);
  });
});
