import type { AddressInfo } from 'node:net';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, Tracing } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { usageProcessor } from '#workers/queues/usage';
import { bearer, createTestAccount, createTestApp, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';
import { until } from '../helpers/until.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// Tracing on, with every span kept in memory: one proxied call followed from the edge into the
// usage worker's job, one cookbook session from the edge into its workflow and activity, and no
// key, token, query string or body in any span. Edge, queue worker and Temporal worker share this
// process (and so one tracer provider), as they share the trace.

const PLATFORM_KEY = 'plat_key_TRACE_0123456789abcdef';
const CALLER_SECRET_PATH = 'sk_live_pathsecret0123456789';
const CALLER_QUERY_SECRET = 'querysecret-9f8e7d6c5b4a';
const BODY_SECRET = 'body-secret-3c2b1a0f9e8d';
const ANSWER_SECRET = 'answer-secret-7a6b5c4d3e2f';

const hex = (bytes: number) => [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, '0')).join('');

describe('tracing', () => {
  const exporter = new InMemorySpanExporter();
  const taskQueue = uniqueId('tracing-');
  const prefix = uniqueId('tracing');
  let tracing: Tracing;
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let usageWorker: Worker;
  let temporalWorker: RunningWorker;
  let account: TestAccount;
  let apiId: string;

  beforeAll(async () => {
    const started = await Tracing.start({ service: 'platform-test', settings: { OTEL_TRACES_SAMPLER_ARG: 1 }, trustRemoteSampling: false, exporter });
    if (!started) throw new Error('tracing did not start with an exporter');
    tracing = started;
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answer: ANSWER_SECRET }));
    });
    app = await createTestApp(
      { ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, USAGE_FLUSH_MS: '20', TEMPORAL_TASK_QUEUE: taskQueue, CREDIT_RESERVATION: 'false' },
      { tracing },
    );
    await loadCookbooks(app.deps.sql);
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const usage = usageProcessor({ sql: app.deps.sql, tracing });
    usageWorker = new Worker(usage.job.queue, usage.process, { connection: workerRedis, prefix, concurrency: 1 });
    temporalWorker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix: prefix, tracing });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.002', auth: 'query:api_key', platformKey: PLATFORM_KEY });
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await usageWorker?.close();
    await temporalWorker?.stop();
    await app?.close();
    await workerRedis?.quit();
    await upstream?.close();
    await tracing?.shutdown();
  });

  const spans = () => exporter.getFinishedSpans();
  const inTrace = (traceId: string) => spans().filter((span) => span.spanContext().traceId === traceId);
  const named = (list: ReadableSpan[], name: string) => {
    const found = list.find((span) => span.name === name);
    expect(found, `no span "${name}" among ${list.map((span) => span.name).join(', ')}`).toBeDefined();
    return found as ReadableSpan;
  };
  const childOf = (child: ReadableSpan, parent: ReadableSpan) => {
    expect(child.spanContext().traceId, `${child.name} in ${parent.name}'s trace`).toBe(parent.spanContext().traceId);
    expect(child.parentSpanId, `${child.name}'s parent is ${parent.name}`).toBe(parent.spanContext().spanId);
  };

  it("follows one proxied call from the caller's traceparent through charge and upstream into the usage worker's job", async () => {
    const traceId = hex(16);
    const callerSpanId = hex(8);
    const res = await rawRequest(edge, {
      method: 'POST',
      path: `/api/v1/proxy/${apiId}/v1/items/${CALLER_SECRET_PATH}?token=${CALLER_QUERY_SECRET}`,
      headers: { ...bearer(account.fullKey), traceparent: `00-${traceId}-${callerSpanId}-01`, 'content-type': 'application/json' },
      body: JSON.stringify({ secret: BODY_SECRET }),
    });
    expect(res.status, res.body.toString()).toBe(200);
    await app.usage.flush();
    await until('the usage job made its span', () => inTrace(traceId).some((span) => span.name === 'usage-events process'), 15_000);

    const trace = inTrace(traceId);
    const server = named(trace, 'POST /api/v1/proxy/:apiId/*');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.parentSpanId, "the edge continues the caller's trace").toBe(callerSpanId);
    expect(server.attributes).toMatchObject({
      'http.route': '/api/v1/proxy/:apiId/*',
      'http.request.method': 'POST',
      'http.response.status_code': 200,
    });

    const charge = named(trace, 'charge');
    childOf(charge, server);
    expect(charge.attributes).toMatchObject({ 'platform.api_id': apiId, 'platform.account_id': account.accountId, 'platform.cost_micros': 2_000 });

    const call = named(trace, 'upstream POST');
    childOf(call, server);
    expect(call.kind).toBe(SpanKind.CLIENT);
    expect(call.attributes).toMatchObject({ 'server.address': '127.0.0.1', 'http.response.status_code': 200, 'url.path': '/v1/items/{redacted}' });

    const publish = named(trace, 'usage-events publish');
    childOf(publish, server);
    expect(publish.kind).toBe(SpanKind.PRODUCER);
    expect(publish.attributes).toMatchObject({ 'platform.outcome': 'served', 'messaging.destination.name': 'usage-events' });

    const job = named(trace, 'usage-events process');
    childOf(job, publish);
    expect(job.kind).toBe(SpanKind.CONSUMER);
    expect(job.attributes).toMatchObject({
      'messaging.batch.message_count': 1,
      'platform.usage.inserted': 1,
      'messaging.message.id': expect.any(String),
    });
    expect(job.links.map((link) => link.context.spanId)).toContain(publish.spanContext().spanId);
    expect(job.resource.attributes['service.name']).toBe('platform-test');

    // Our trace context is not sent to the third party: the upstream saw the caller's own header, unchanged.
    const seen = upstream.seen.at(-1);
    expect(seen?.headers.traceparent).toBe(`00-${traceId}-${callerSpanId}-01`);
    expect(seen?.headers.tracestate).toBeUndefined();
    for (const span of trace) expect(JSON.stringify(seen?.headers), span.name).not.toContain(span.spanContext().spanId);
  });

  it('ignores a caller\'s "sampled" flag it does not share: the sampling decision is the edge\'s', async () => {
    // Ratio 1 here, so an unsampled caller's trace is still recorded: the flag alone decides nothing.
    const traceId = hex(16);
    const res = await rawRequest(edge, {
      method: 'GET',
      path: `/api/v1/proxy/${apiId}/ok`,
      headers: { ...bearer(account.fullKey), traceparent: `00-${traceId}-${hex(8)}-00` },
    });
    expect(res.status).toBe(200);
    await until('the call was traced', () => inTrace(traceId).some((span) => span.name === 'usage-events publish'));
    expect(inTrace(traceId).map((span) => span.name)).toEqual(expect.arrayContaining(['GET /api/v1/proxy/:apiId/*', 'charge', 'upstream GET']));
  });

  it("follows a cookbook session from the edge into its workflow, the workflow's activity and a step's update", async () => {
    const weather = await createTestApi(app.deps.sql, 'weather');
    const sms = await createTestApi(app.deps.sql, 'sms');
    const started = await app.inject({
      method: 'POST',
      url: '/api/v1/cookbooks/weather-alert-sms/start',
      headers: bearer(account.fullKey),
      payload: { selectedApis: { weather, sms } },
    });
    const { session } = expectOk<{ session: { sessionId: string } }>(started, 201);
    const startServer = spans().find((span) => span.name === 'POST /api/v1/cookbooks/:id/start');
    expect(startServer).toBeDefined();
    const startTrace = (startServer as ReadableSpan).spanContext().traceId;
    // The activity's span is exported when it ends; the workflow's span of scheduling it when the workflow next runs.
    const names = () => inTrace(startTrace).map((span) => span.name);
    await until(
      'the activity and its scheduling made their spans',
      () => names().includes('RunActivity:recordSessionChange') && names().includes('StartActivity:recordSessionChange'),
      20_000,
    );

    const trace = inTrace(startTrace);
    const startWorkflow = named(trace, 'StartWorkflow:cookbookSession');
    childOf(startWorkflow, startServer as ReadableSpan);
    const scheduled = named(trace, 'StartActivity:recordSessionChange');
    const activity = named(trace, 'RunActivity:recordSessionChange');
    childOf(activity, scheduled);
    // The workflow's run span (the activity's grandparent) ends with the session; its children name it.
    expect(scheduled.parentSpanId).toBeDefined();
    expect(scheduled.parentSpanId).not.toBe(startWorkflow.spanContext().spanId);

    const completed = await app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${session.sessionId}/complete-step`,
      headers: bearer(account.fullKey),
      payload: { stepId: 'fetch-forecast', resultData: { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [] } },
    });
    expectOk(completed);
    const stepServer = spans().find((span) => span.name === 'POST /api/v1/cookbooks/sessions/:sessionId/complete-step');
    expect(stepServer).toBeDefined();
    const stepTrace = (stepServer as ReadableSpan).spanContext().traceId;
    await until('the workflow handled the update', () => inTrace(stepTrace).some((span) => span.name === 'HandleUpdate:completeStep'), 20_000);
    const update = named(inTrace(stepTrace), 'StartWorkflowUpdate:completeStep');
    childOf(update, stepServer as ReadableSpan);
    childOf(named(inTrace(stepTrace), 'HandleUpdate:completeStep'), update);
  });

  it('off (no endpoint set), an edge makes no span, even with a tracer provider registered in its process', async () => {
    const off = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true', REDIS_PREFIX: prefix, OTEL_EXPORTER_OTLP_ENDPOINT: '' });
    try {
      expect(off.tracing).toBeNull();
      const traceId = hex(16);
      const res = await off.inject({
        method: 'GET',
        url: `/api/v1/proxy/${apiId}/ok`,
        headers: { ...bearer(account.fullKey), traceparent: `00-${traceId}-${hex(8)}-01` },
      });
      expect(res.statusCode, res.body).toBe(200);
      await off.usage.flush();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(inTrace(traceId)).toEqual([]);
    } finally {
      await off.close();
    }
  });

  it('puts no key, token, query string or body in any span', async () => {
    const all = spans();
    expect(all.length).toBeGreaterThan(10);
    const secrets = [account.fullKey, PLATFORM_KEY, CALLER_SECRET_PATH, CALLER_QUERY_SECRET, BODY_SECRET, ANSWER_SECRET, 'token='];
    for (const span of all) {
      const text = JSON.stringify({
        name: span.name,
        attributes: span.attributes,
        events: span.events,
        links: span.links.map((link) => link.attributes ?? {}),
        status: span.status,
        resource: span.resource.attributes,
      });
      for (const secret of secrets) expect(text, `span "${span.name}" holds a secret`).not.toContain(secret);
    }
  });
});
