import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '#core/platform';
import { bearer, createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { loginUser, registerUser, type BrowserSession, type RegisteredUser } from '../helpers/session.js';
import { uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startWebhookWorker } from '../helpers/webhooks.js';

interface ConnectRequest {
  id: string;
  apiId: string;
  apiName: string;
  authKind: string;
  oauthProvider: string | null;
  status: string;
  purpose: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string;
  resolvedAt: string | null;
  connectUrl: string;
  next: string;
}
type RequestAnswer = { request: ConnectRequest; created?: boolean };

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const PURPOSE = 'Send the weekly sales report as a text message to the on-call phone, as the user asked.';

/**
 * Connect requests (issue 30, §3): an agent asks a person to connect an API; the request reaches the
 * inbox (REST), e-mail (a real SMTP server in the test) and signed webhooks (a real receiver); the
 * agent waits by long poll, event stream or MCP, and the person answers by connecting or declining.
 */
describe('connect requests', () => {
  const redisPrefix = uniqueId('creq');
  let app: FastifyInstance;
  let edge: string;
  let redis: Redis;
  let mail: MailServer;
  let emailWorker: Worker;
  let webhookWorker: Worker;
  let receiver: TestUpstream;
  const received: Received[] = [];
  let keyApi: string;
  let oauthApi: string;
  let openApi: string;
  let owner: RegisteredUser;
  let browser: BrowserSession;
  let agentKey: string;
  let otherAgentKey: string;
  const clients: Client[] = [];

  const inject = (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Record<string, string>, payload?: object) =>
    app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const ask = (key: string, apiId: string, body: object, query = '') => inject('POST', `/api/v1/connect/${apiId}/request${query}`, bearer(key), body);
  const poll = (key: string, id: string, query = '') => inject('GET', `/api/v1/connect/requests/${id}${query}`, bearer(key));

  async function newAgentKey(fullKey: string, name: string): Promise<string> {
    return expectOk<{ fullKey: string }>(await inject('POST', '/api/v1/agent-keys', bearer(fullKey), { name }), 201).fullKey;
  }

  beforeAll(async () => {
    receiver = await startUpstream((req, res, seen) => {
      received.push({ path: req.url ?? '/', headers: req.headers, body: seen.body?.toString('utf8') ?? '' });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    mail = await startMailServer();
    app = await createTestApp({ REDIS_PREFIX: redisPrefix, ALLOW_PRIVATE_UPSTREAMS: 'true', SSE_HEARTBEAT_MS: '500' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    redis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis, redisPrefix, smtpUrl: mail.url, publicUrl: app.deps.settings.PUBLIC_URL });
    webhookWorker = startWebhookWorker({ sql: app.deps.sql, redis, redisPrefix });

    keyApi = await registerApi({ baseUrl: receiver.url, price: '0.001', auth: 'header:X-Upstream-Key' });
    oauthApi = await registerApi({ baseUrl: receiver.url, price: '0.001', auth: 'oauth2' });
    openApi = await registerApi({ baseUrl: receiver.url, price: '0.001', auth: 'none' });
    await app.deps.sql`
      update apis set oauth_provider = 'login.example.test',
             oauth = ${app.deps.sql.json({ scopes: { 'mail.read': 'Read mail', 'mail.send': 'Send mail' } })}
       where id = ${oauthApi}`;

    owner = await registerUser(app);
    browser = await loginUser(app, owner);
    agentKey = await newAgentKey(owner.fullKey, 'reporting agent');
    otherAgentKey = await newAgentKey(owner.fullKey, 'another agent');
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await app?.close();
    await emailWorker?.close();
    await webhookWorker?.close();
    await redis?.quit();
    await receiver?.close();
    await mail?.close();
  });

  it('refuses bad input with the error shape: no credentials, missing or thin purpose, control characters, unknown API, scopes', async () => {
    expectError(await inject('POST', `/api/v1/connect/${keyApi}/request`, {}, { purpose: PURPOSE }), 401, 'missing_credentials');
    expectError(await ask(agentKey, keyApi, {}), 400, 'validation_failed');
    const thin = expectError(await ask(agentKey, keyApi, { purpose: 'pls' }), 400, 'validation_failed');
    expect(String(thin.error)).toContain('purpose');
    expectError(await ask(agentKey, keyApi, { purpose: 'x'.repeat(1001) }), 400, 'validation_failed');
    expectError(await ask(agentKey, keyApi, { purpose: 'Send the report\u202e now please' }), 400, 'validation_failed');
    expectError(await ask(agentKey, keyApi, { purpose: PURPOSE, scopes: 'mail.read' }), 400, 'validation_failed');
    expectError(await ask(agentKey, uniqueId('no-such-api-'), { purpose: PURPOSE }), 404, 'not_found');
    expectError(await ask(agentKey, 'Bad Id!', { purpose: PURPOSE }), 400, 'validation_failed');
    const open = expectError(await ask(agentKey, openApi, { purpose: PURPOSE }), 409, 'conflict');
    expect(String(open.hint)).toContain(`/api/v1/proxy/${openApi}/`);
    const keyScopes = expectError(await ask(agentKey, keyApi, { purpose: PURPOSE, scopes: ['mail.read'] }), 400, 'validation_failed');
    expect(String(keyScopes.error)).toContain('does not use OAuth');
    const unknownScope = expectError(await ask(agentKey, oauthApi, { purpose: PURPOSE, scopes: ['mail.delete'] }), 400, 'validation_failed');
    expect(String(unknownScope.error)).toContain('mail.delete');
    expect(String(unknownScope.hint)).toContain('mail.read');
    expectError(await poll(agentKey, 'not-a-uuid'), 404, 'not_found');
    expectError(await poll(agentKey, crypto.randomUUID(), '?wait=61'), 400, 'validation_failed');
  });

  it('creates a request for a key API, answers an identical one with the same request, and shows each key its own', async () => {
    const created = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: `  ${PURPOSE}  ` }), 201);
    const request = created.request;
    expect(created.created).toBe(true);
    expect(request).toMatchObject({ apiId: keyApi, apiName: `Test ${keyApi}`, authKind: 'key', status: 'pending', purpose: PURPOSE, scopes: [] });
    expect(request.connectUrl).toBe(`${new URL(app.deps.settings.PUBLIC_URL).origin}/inbox?request=${request.id}`);
    const days = (Date.parse(request.expiresAt) - Date.parse(request.createdAt)) / 86_400_000;
    expect(days).toBeCloseTo(7, 2);
    expect(request.next).toContain('connected');

    const again = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: PURPOSE }), 200);
    expect(again).toMatchObject({ created: false, request: { id: request.id } });
    const otherPurpose = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: `${PURPOSE} Also the monthly one.` }), 201);
    expect(otherPurpose.request.id).not.toBe(request.id);
    // Another key's identical request is its own.
    const fromOther = expectOk<RequestAnswer>(await ask(otherAgentKey, keyApi, { purpose: PURPOSE }), 201);
    expect(fromOther.request.id).not.toBe(request.id);

    expect(expectOk<RequestAnswer>(await poll(agentKey, request.id)).request).toMatchObject({ id: request.id, status: 'pending' });
    // An agent key sees the requests it made; the account's key and the dashboard see them all.
    expectError(await poll(otherAgentKey, request.id), 404, 'not_found');
    const mine = expectOk<{ requests: ConnectRequest[] }>(await inject('GET', '/api/v1/connect/requests', bearer(agentKey)));
    expect(mine.requests.map((r) => r.id)).toEqual(expect.arrayContaining([request.id, otherPurpose.request.id]));
    expect(mine.requests.map((r) => r.id)).not.toContain(fromOther.request.id);
    const all = expectOk<{ requests: ConnectRequest[] }>(await inject('GET', '/api/v1/connect/requests', { cookie: browser.cookie }));
    expect(all.requests.map((r) => r.id)).toEqual(expect.arrayContaining([request.id, otherPurpose.request.id, fromOther.request.id]));
    expectOk(await poll(owner.fullKey, request.id));

    // Another account's request is 404 to every credential of this one, and the other way round.
    const stranger = await createTestAccount(app.deps.sql);
    expectError(await poll(stranger.fullKey, request.id), 404, 'not_found');
    expectError(await inject('DELETE', `/api/v1/connect/requests/${request.id}`, bearer(stranger.fullKey)), 404, 'not_found');
    expect(expectOk<{ requests: ConnectRequest[] }>(await inject('GET', '/api/v1/connect/requests', bearer(stranger.fullKey))).requests).toEqual([]);

    // Tidy: the agent cancels what it no longer needs.
    for (const id of [otherPurpose.request.id, fromOther.request.id]) {
      const key = id === fromOther.request.id ? otherAgentKey : agentKey;
      expect(expectOk<RequestAnswer>(await inject('DELETE', `/api/v1/connect/requests/${id}`, bearer(key))).request.status).toBe('cancelled');
    }
  });

  it('takes OAuth scopes the API declares, lists pending first and pages with a cursor', async () => {
    const oauth = expectOk<RequestAnswer>(await ask(agentKey, oauthApi, { purpose: PURPOSE, scopes: ['mail.send', 'mail.read', 'mail.send'] }), 201);
    expect(oauth.request).toMatchObject({ authKind: 'oauth', oauthProvider: 'login.example.test', scopes: ['mail.read', 'mail.send'] });
    const list = expectOk<{ requests: ConnectRequest[]; nextCursor: string | null }>(
      await inject('GET', '/api/v1/connect/requests?limit=1', { cookie: browser.cookie }),
    );
    expect(list.requests).toHaveLength(1);
    expect(list.requests[0]!.status).toBe('pending');
    expect(list.nextCursor).not.toBeNull();
    const rest = expectOk<{ requests: ConnectRequest[] }>(
      await inject('GET', `/api/v1/connect/requests?limit=200&cursor=${list.nextCursor}`, { cookie: browser.cookie }),
    );
    const statuses = [list.requests[0]!, ...rest.requests].map((r) => r.status);
    expect(statuses.lastIndexOf('pending')).toBeLessThan(statuses.findIndex((s) => s !== 'pending'));
    expect(new Set([list.requests[0]!.id, ...rest.requests.map((r) => r.id)]).size).toBe(statuses.length);
    expectError(await inject('GET', `/api/v1/connect/requests?cursor=${crypto.randomUUID()}`, bearer(agentKey)), 400, 'validation_failed');
    expectOk(await inject('DELETE', `/api/v1/connect/requests/${oauth.request.id}`, bearer(agentKey)));
  });

  it('lets only a person in the dashboard decline; an ended request cannot be declined or cancelled again', async () => {
    const { request } = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: `${PURPOSE} (to decline)` }), 201);
    const url = `/api/v1/connect/requests/${request.id}/decline`;
    expect(String(expectError(await inject('POST', url, bearer(agentKey)), 403, 'forbidden').hint)).toContain('DELETE');
    expectError(await inject('POST', url, bearer(owner.fullKey)), 403, 'forbidden');
    // The cookie needs its CSRF token on a write.
    expectError(await inject('POST', url, { cookie: browser.cookie }), 403, 'csrf_failed');
    const declined = expectOk<RequestAnswer>(await inject('POST', url, browser.writeHeaders));
    expect(declined.request).toMatchObject({ id: request.id, status: 'declined' });
    expect(declined.request.resolvedAt).not.toBeNull();
    expect(expectOk<RequestAnswer>(await poll(agentKey, request.id)).request.next).toContain('declined');
    expectError(await inject('POST', url, browser.writeHeaders), 409, 'conflict');
    expectError(await inject('DELETE', `/api/v1/connect/requests/${request.id}`, bearer(agentKey)), 409, 'conflict');
    const [row] = await app.deps.sql<{ resolved_by_person_id: string | null }[]>`
      select resolved_by_person_id from connect_requests where id = ${request.id}`;
    expect(row?.resolved_by_person_id).toMatch(/^per_/);
  });

  it('is connected when the person connects a key; a long poll and the event stream answer at once', async () => {
    const { request } = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: `${PURPOSE} (to connect)` }), 201);
    // The event stream: the state now, then the outcome, then the end.
    const stream = await fetch(`${edge}/api/v1/connect/requests/${request.id}/events`, { headers: bearer(agentKey) });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    const reader = stream.body!.getReader();
    let text = '';
    const readUntil = async (needle: string) => {
      while (!text.includes(needle)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      return text;
    };
    await readUntil('event: connect_request.pending');

    const started = Date.now();
    const waiting = poll(agentKey, request.id, '?wait=30');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const connected = await inject('POST', `/api/v1/connect/${keyApi}`, browser.writeHeaders, { apiKey: 'their-own-key-12345678' });
    expectOk(connected, 201);
    const answer = expectOk<RequestAnswer>(await waiting);
    expect(answer.request).toMatchObject({ id: request.id, status: 'connected' });
    expect(answer.request.next).toContain(`/api/v1/proxy/${keyApi}/`);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(JSON.stringify(answer)).not.toContain('their-own-key');

    await readUntil('event: connect_request.connected');
    // The stream ends after the outcome.
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).not.toContain('their-own-key');
    const [row] = await app.deps.sql<{ resolved_by_person_id: string | null; oauth_connection_id: string | null }[]>`
      select resolved_by_person_id, oauth_connection_id from connect_requests where id = ${request.id}`;
    expect(row).toMatchObject({ oauth_connection_id: null });
    expect(row?.resolved_by_person_id).toMatch(/^per_/);

    // An ended request's stream says how it ended and ends; a wait on it answers at once.
    const again = await fetch(`${edge}/api/v1/connect/requests/${request.id}/events`, { headers: bearer(agentKey) });
    expect(await again.text()).toContain('event: connect_request.connected');
    expect(expectOk<RequestAnswer>(await poll(agentKey, request.id, '?wait=30')).request.status).toBe('connected');
    expectOk(await inject('DELETE', `/api/v1/connect/${keyApi}`, bearer(owner.fullKey)));
  });

  it('expires a request nobody answered (lazily, on the next read)', async () => {
    const { request } = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose: `${PURPOSE} (to expire)` }), 201);
    await app.deps
      .sql`update connect_requests set expires_at = now() - interval '1 second', created_at = now() - interval '8 days' where id = ${request.id}`;
    const expired = expectOk<RequestAnswer>(await poll(agentKey, request.id)).request;
    expect(expired.status).toBe('expired');
    expect(expired.next).toContain('expired');
    expectError(await inject('DELETE', `/api/v1/connect/requests/${request.id}`, bearer(agentKey)), 409, 'conflict');
  });

  it("e-mails the account's owner and sends signed webhooks without secrets", async () => {
    const hook = expectOk<{ secret: string }>(
      await inject('POST', '/api/v1/webhooks', bearer(owner.fullKey), {
        url: `${receiver.url}/hooks`,
        eventTypes: ['connection.requested', 'connection.request_resolved'],
      }),
      201,
    );
    const purpose = `${PURPOSE} <b>bold</b> & more`;
    const { request } = expectOk<RequestAnswer>(await ask(agentKey, keyApi, { purpose }), 201);

    const message = await mail.waitFor((m) => recipientOf(m).includes(owner.email) && (m.text ?? '').includes(request.id));
    expect(message.subject).toBe(`An agent asks you to connect Test ${keyApi}`);
    expect(message.text).toContain(purpose);
    expect(message.text).toContain(`${new URL(app.deps.settings.PUBLIC_URL).origin}/inbox?request=${request.id}`);
    expect(message.html).toContain('&lt;b&gt;bold&lt;/b&gt; &amp; more');

    const verify = (r: Received) =>
      new Webhook(hook.secret).verify(r.body, {
        'webhook-id': String(r.headers['webhook-id']),
        'webhook-timestamp': String(r.headers['webhook-timestamp']),
        'webhook-signature': String(r.headers['webhook-signature']),
      }) as { type: string; data: Record<string, unknown> };
    const requested = await eventually(
      'connection.requested webhook',
      () => received.map(verify).find((event) => event.type === 'connection.requested' && event.data.requestId === request.id),
      { timeoutMs: 15_000 },
    );
    expect(requested.data).toMatchObject({
      apiId: keyApi,
      apiName: `Test ${keyApi}`,
      authKind: 'key',
      purpose,
      scopes: [],
      connectUrl: request.connectUrl,
    });

    expectOk(await inject('POST', `/api/v1/connect/${keyApi}`, bearer(owner.fullKey), { apiKey: 'webhook-test-key-abcdef' }), 201);
    const resolved = await eventually(
      'connection.request_resolved webhook',
      () => received.map(verify).find((event) => event.type === 'connection.request_resolved' && event.data.requestId === request.id),
      { timeoutMs: 15_000 },
    );
    expect(resolved.data).toMatchObject({ apiId: keyApi, status: 'connected', oauthConnectionId: null });
    for (const r of received) expect(r.body).not.toContain('webhook-test-key');
    expectOk(await inject('DELETE', `/api/v1/connect/${keyApi}`, bearer(owner.fullKey)));
  });

  it('request_connection and get_connection_request over MCP, with the agent told what to do next', async () => {
    const client = new Client({ name: 'connect-requests-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${edge}/mcp`), { authProvider: { token: async () => agentKey } }));
    clients.push(client);
    const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>;

    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === 'request_connection');
    expect(tool?.inputSchema).toMatchObject({ required: expect.arrayContaining(['apiId', 'purpose']) });
    expect(Object.keys(tool?.inputSchema.properties ?? {})).not.toContain('wait');

    const refused = await call('request_connection', { apiId: keyApi, purpose: 'no' });
    expect(refused.isError).toBe(true);
    expect(JSON.parse((refused.content[0] as { text: string }).text)).toMatchObject({ status: 400, code: 'validation_failed' });

    const made = await call('request_connection', { apiId: oauthApi, purpose: `${PURPOSE} (over MCP)`, scopes: ['mail.send'] });
    expect(made.isError ?? false, JSON.stringify(made.content)).toBe(false);
    const request = (made.structuredContent as RequestAnswer).request;
    expect(request).toMatchObject({ apiId: oauthApi, status: 'pending', scopes: ['mail.send'] });
    expect(request.next).toContain('get_connection_request');

    // The person connects in the dashboard (here the key route stands in for the OAuth grant, which
    // resolves by provider): the MCP wait answers with the outcome.
    const waited = call('get_connection_request', { requestId: request.id, waitSeconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const { resolveConnectRequests } = await import('#core/connect-requests');
    const moved = await resolveConnectRequests(
      app.deps.sql,
      { accountId: owner.accountId, oauthProvider: 'login.example.test', grantedScopes: ['mail.read'] },
      app.connectRequests.notices,
    );
    expect(moved.map((r) => r.id)).not.toContain(request.id);
    await resolveConnectRequests(
      app.deps.sql,
      { accountId: owner.accountId, oauthProvider: 'login.example.test', grantedScopes: ['mail.read', 'mail.send'] },
      app.connectRequests.notices,
    );
    const answer = await waited;
    expect(answer.isError ?? false, JSON.stringify(answer.content)).toBe(false);
    expect((answer.structuredContent as RequestAnswer).request).toMatchObject({ id: request.id, status: 'connected' });
    expect((answer.structuredContent as RequestAnswer).request.next).toContain('call_api');
  });
});
