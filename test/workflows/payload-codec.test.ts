import { randomBytes } from 'node:crypto';
import type { Payload } from '@temporalio/common';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, EncryptionCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA, parseCodecKeys, toCodecJson } from '#core/platform';
import { loadCookbooks } from '#db/cookbooks';
import { workflowIdFor } from '#workflows/messages';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { createTestApi, startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { uniqueId } from '../helpers/settings.js';

const newKey = (id: string) => `${id}:${randomBytes(32).toString('hex')}`;
const utf8 = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
const jsonPayload = (value: unknown): Payload => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value)) });

/**
 * Every Payload in a raw (undecoded) history: objects with `data` bytes and a `metadata` map.
 * Search attributes are left out: Temporal indexes them, so no codec may touch them (they hold ids
 * and statuses only, by design).
 */
function payloadsIn(value: unknown, found: Payload[] = []): Payload[] {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return found;
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && record.metadata && typeof record.metadata === 'object') {
    found.push(record as Payload);
    return found;
  }
  for (const [name, child] of Object.entries(record)) if (name !== 'searchAttributes') payloadsIn(child, found);
  return found;
}

describe('payload codec (unit)', () => {
  it('parses key lists and refuses bad ones with the reason', () => {
    const keys = parseCodecKeys(`${newKey('k2')}, ${newKey('k1')}`);
    expect(keys.map((k) => k.id)).toEqual(['k2', 'k1']);
    expect(parseCodecKeys(`b64:${randomBytes(32).toString('base64')}`)[0]!.key).toHaveLength(32);
    expect(() => parseCodecKeys('')).toThrow(/at least one key/);
    expect(() => parseCodecKeys('nokey')).toThrow(/id:key/);
    expect(() => parseCodecKeys(`short:${randomBytes(16).toString('hex')}`)).toThrow(/32 bytes/);
    expect(() => parseCodecKeys(`${newKey('same')},${newKey('same')}`)).toThrow(/unique/);
  });

  it('encrypts with the first key, decrypts with any listed key, and refuses tampering', async () => {
    const [oldKey, nextKey] = [newKey('2026-01'), newKey('2026-07')];
    const before = new EncryptionCodec(parseCodecKeys(oldKey));
    const [sealed] = await before.encode([jsonPayload({ secret: 'tell-no-one' })]);
    expect(utf8(sealed!.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
    expect(utf8(sealed!.metadata![KEY_ID_METADATA])).toBe('2026-01');
    expect(utf8(sealed!.data)).not.toContain('tell-no-one');

    // Rotation: the new key goes first and encrypts; the old one still opens what it sealed.
    const rotated = new EncryptionCodec(parseCodecKeys(`${nextKey},${oldKey}`));
    expect(utf8((await rotated.decode([sealed!]))[0]!.data)).toBe('{"secret":"tell-no-one"}');
    const [resealed] = await rotated.encode([jsonPayload(1)]);
    expect(utf8(resealed!.metadata![KEY_ID_METADATA])).toBe('2026-07');
    // Dropping the old key too early is an error naming the key, not garbage.
    await expect(new EncryptionCodec(parseCodecKeys(nextKey)).decode([sealed!])).rejects.toThrow(/"2026-01"/);

    const tampered = Buffer.from(sealed!.data!);
    tampered[20] = tampered[20]! ^ 1;
    await expect(before.decode([{ ...sealed!, data: tampered }])).rejects.toThrow();
    // Payloads written before the codec existed pass through.
    expect(utf8((await before.decode([jsonPayload('plain')]))[0]!.data)).toBe('"plain"');
  });
});

describe('payload codec in Temporal history, and the codec server', () => {
  const taskQueue = uniqueId('codec-');
  const redisPrefix = uniqueId('codec');
  const firstKeys = newKey('first');
  const rotatedKeys = `${newKey('second')},${firstKeys}`;
  const operator = { authorization: `Basic ${Buffer.from('operator:codec-pass').toString('base64')}` };
  const uiOrigin = 'http://127.0.0.1:18233';
  let app: FastifyInstance;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let account: TestAccount;
  let weatherApi: string;
  let smsApi: string;

  const edge = (keys: string) =>
    createTestApp({
      TEMPORAL_TASK_QUEUE: taskQueue,
      REDIS_PREFIX: redisPrefix,
      TEMPORAL_CODEC_KEYS: keys,
      OPERATOR_BASIC_AUTH: 'operator:codec-pass',
      TEMPORAL_UI_URL: uiOrigin,
    });
  const rawHistory = async (sessionId: string) => {
    const { history } = await app.deps.temporal.client.workflowService.getWorkflowExecutionHistory({
      namespace: app.deps.settings.TEMPORAL_NAMESPACE,
      execution: { workflowId: workflowIdFor(sessionId) },
    });
    return history!.events!;
  };
  const complete = (sessionId: string, stepId: string, resultData: unknown) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/cookbooks/sessions/${sessionId}/complete-step`,
      headers: bearer(account.fullKey),
      payload: { stepId, resultData } as object,
    });

  beforeAll(async () => {
    app = await edge(firstKeys);
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix, codecKeys: parseCodecKeys(firstKeys) });
    account = await createTestAccount(app.deps.sql);
    weatherApi = await createTestApi(app.deps.sql, 'weather');
    smsApi = await createTestApi(app.deps.sql, 'sms');
  });
  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await app?.close();
    await worker?.stop();
    await workerRedis?.quit();
  });

  it('keeps resultData out of history in the clear, survives a key rotation, and lets operators decode through /codec', async () => {
    const marker = `forecast-${randomBytes(6).toString('hex')}`;
    const started = expectOk<{ session: { sessionId: string } }>(
      await app.inject({
        method: 'POST',
        url: '/api/v1/cookbooks/weather-alert-sms/start',
        headers: bearer(account.fullKey),
        payload: { selectedApis: { weather: weatherApi, sms: smsApi } },
      }),
      201,
    );
    const { sessionId } = started.session;
    expectOk(await complete(sessionId, 'fetch-forecast', { location: { name: marker, lat: 1, lon: 2 }, severe: true, alerts: [] }));

    const events = await rawHistory(sessionId);
    const payloads = payloadsIn(events);
    expect(payloads.length).toBeGreaterThan(3);
    for (const payload of payloads) {
      expect(utf8(payload.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
      expect(utf8(payload.metadata![KEY_ID_METADATA])).toBe('first');
    }
    const everything = Buffer.concat(payloads.flatMap((p) => [Buffer.from(p.data!), ...Object.values(p.metadata!).map((m) => Buffer.from(m!))]));
    expect(everything.includes(marker)).toBe(false);
    // The platform itself still reads what it wrote.
    const detail = expectOk<{ session: { steps: { stepId: string; resultData: unknown }[] } }>(
      await app.inject({ method: 'GET', url: `/api/v1/cookbooks/sessions/${sessionId}`, headers: bearer(account.fullKey) }),
    );
    expect(JSON.stringify(detail.session.steps.find((s) => s.stepId === 'fetch-forecast'))).toContain(marker);

    // An operator's Temporal UI posts the raw payloads to the codec endpoint and reads them back.
    const body = toCodecJson(payloads);
    expectError(await app.inject({ method: 'POST', url: '/codec/decode', payload: body }), 401, 'missing_credentials');
    const decoded = await app.inject({
      method: 'POST',
      url: '/codec/decode',
      headers: { ...operator, origin: uiOrigin, 'x-namespace': 'default' },
      payload: body,
    });
    expect(decoded.statusCode, decoded.body).toBe(200);
    expect(decoded.headers['access-control-allow-origin']).toBe(uiOrigin);
    expect(decoded.headers['access-control-allow-credentials']).toBe('true');
    const opened = (JSON.parse(decoded.body) as { payloads: { metadata: Record<string, string>; data: string }[] }).payloads;
    expect(opened).toHaveLength(payloads.length);
    expect(opened.every((p) => Buffer.from(p.metadata.encoding!, 'base64').toString() !== ENCRYPTED_ENCODING)).toBe(true);
    expect(opened.map((p) => Buffer.from(p.data, 'base64').toString()).join('\n')).toContain(marker);

    // Rotation: edge and worker restart with a new first key and the old one kept. The session
    // replays its old history (decrypting with "first") and what it writes now uses "second".
    await app.close();
    await worker.stop();
    app = await edge(rotatedKeys);
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix, codecKeys: parseCodecKeys(rotatedKeys) });
    expectOk(await complete(sessionId, 'draft-message', { message: `${marker}-draft`, recipients: ['+4712345678'] }));
    const keyIds = new Set(payloadsIn(await rawHistory(sessionId)).map((p) => utf8(p.metadata![KEY_ID_METADATA])));
    expect([...keyIds].sort()).toEqual(['first', 'second']);
  });

  it("answers the UI origin's preflight without a login, and nobody else's", async () => {
    const preflight = (origin: string) =>
      app.inject({
        method: 'OPTIONS',
        url: '/codec/decode',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-namespace' },
      });
    const ours = await preflight(uiOrigin);
    expect(ours.statusCode).toBe(204);
    expect(ours.headers['access-control-allow-origin']).toBe(uiOrigin);
    expect(String(ours.headers['access-control-allow-headers'])).toContain('x-namespace');
    const theirs = await preflight('https://evil.example');
    expect(theirs.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('encodes for the UI, refuses other namespaces and malformed bodies with the error shape', async () => {
    const sealed = await app.inject({
      method: 'POST',
      url: '/codec/encode',
      headers: operator,
      payload: toCodecJson([jsonPayload({ typed: 'by a person' })]),
    });
    expect(sealed.statusCode, sealed.body).toBe(200);
    const back = await app.inject({ method: 'POST', url: '/codec/decode', headers: operator, payload: JSON.parse(sealed.body) as object });
    expect(Buffer.from((JSON.parse(back.body) as { payloads: { data: string }[] }).payloads[0]!.data, 'base64').toString()).toBe(
      '{"typed":"by a person"}',
    );
    expect(sealed.body).not.toContain(Buffer.from('by a person').toString('base64'));
    expectError(
      await app.inject({ method: 'POST', url: '/codec/decode', headers: { ...operator, 'x-namespace': 'someone-else' }, payload: { payloads: [] } }),
      404,
      'not_found',
    );
    expectError(
      await app.inject({ method: 'POST', url: '/codec/decode', headers: operator, payload: { payloads: 'nope' } }),
      400,
      'validation_failed',
    );
    // The page an operator opens once so the browser holds the login for the UI's requests.
    expectError(await app.inject({ method: 'GET', url: '/codec' }), 401, 'missing_credentials');
    const page = await app.inject({ method: 'GET', url: '/codec', headers: operator });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('logged in');
    // Without OPERATOR_BASIC_AUTH nothing is mounted.
    const bare = await createTestApp({ TEMPORAL_TASK_QUEUE: taskQueue });
    try {
      expect((await bare.inject({ method: 'POST', url: '/codec/decode', payload: { payloads: [] } })).statusCode).toBe(404);
    } finally {
      await bare.close();
    }
  });
});
