import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestAccount, createTestApp, expectError, expectOk } from '../helpers/app.js';

describe('error shape', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    app = await createTestApp({ BODY_LIMIT_BYTES: '4096' });
    const typed = app.withTypeProvider<ZodTypeProvider>();
    typed.post('/api/v1/__test/echo', { schema: { body: z.object({ name: z.string().min(1), count: z.number().int() }) } }, async (request) => ({
      ok: true,
      echoed: request.body,
    }));
    typed.get('/api/v1/__test/boom', async () => {
      throw new Error('database password is hunter2 at /srv/secret/path');
    });
    await app.ready();
  });
  afterAll(async () => app.close());

  it('answers an unknown route with 404 in the error shape', async () => {
    const body = expectError(await app.inject({ method: 'GET', url: '/api/v1/no/such/route' }), 404, 'not_found');
    expect(body.hint).toContain('openapi.json');
    expectError(await app.inject({ method: 'DELETE', url: '/nowhere?x=1' }), 404, 'not_found');
  });

  it('answers a known path asked with another method with 405 and Allow, in the error shape', async () => {
    const res = await app.inject({ method: 'PUT', url: '/api/v1/balance' });
    const body = expectError(res, 405, 'method_not_allowed');
    expect(res.headers.allow, res.body).toContain('GET');
    expect(res.headers.allow, res.body).toContain('POST');
    expect(body.hint).toContain('GET');
    const withParam = await app.inject({ method: 'POST', url: '/api/v1/keys/key_abc?x=1' });
    expectError(withParam, 405, 'method_not_allowed');
    expect(withParam.headers.allow, withParam.body).toContain('PATCH');
    expectError(await app.inject({ method: 'DELETE', url: '/api/v1/health/' }), 405, 'method_not_allowed');
    expectError(await app.inject({ method: 'PUT', url: '/api/v1/keys/key_abc/extra' }), 404, 'not_found');
    // A method no route has, with a body and no Content-Type (found by Schemathesis): still 405.
    const query = await app.inject({ method: 'QUERY' as 'GET', url: '/api/v1/health', payload: 'x' });
    expectError(query, 405, 'method_not_allowed');
    expect(query.headers.allow).toContain('GET');
  });

  it('refuses the NUL character in bodies, query strings and paths with 400 instead of a database error (found by Schemathesis)', async () => {
    const account = await createTestAccount(app.deps.sql);
    const auth = { authorization: `Bearer ${account.fullKey}` };
    const body = expectError(
      await app.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: auth, payload: { name: 'agent\u0000x' } }),
      400,
      'validation_failed',
    );
    expect(body.error).toContain('NUL');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/votes?targetType=api&targetId=a%00b', headers: auth }), 400, 'validation_failed');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/apis/a%00b', headers: auth }), 400, 'validation_failed');
    expectError(
      await app.inject({ method: 'POST', url: '/api/v1/vote', headers: auth, payload: { targetType: 'api', targetId: '\u0000', value: 1 } }),
      400,
      'validation_failed',
    );
  });

  it('refuses, in the JSON body parser, every string Postgres cannot store: lone surrogates and NUL, in values and keys, naming the field path', async () => {
    const post = (payload: string) =>
      app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/json' }, payload });
    // Escaped lone surrogates, high and low, deep in a value and in an object key: a route without
    // a check of its own (this echo route) is covered by the parser.
    const cases: [string, RegExp][] = [
      ['{"name": "a\\ud800", "count": 1}', /\bname\b/],
      ['{"name": "ok", "count": 1, "extra": {"items": [1, {"note": "x\\udfff y"}]}}', /extra\.items\[1\]\.note/],
      ['{"name": "ok", "count": 1, "extra": {"\\udbff": 1}}', /a key of extra/],
      ['{"name": "ok\\u0000", "count": 1}', /\bname\b/],
      ['{"name": "ok", "count": 1, "tags": {"a\\u0000": true}}', /a key of tags/],
    ];
    for (const [payload, where] of cases) {
      const body = expectError(await post(payload), 400, 'validation_failed');
      expect(body.hint, payload).toMatch(where);
      expect(body.error, payload).toMatch(/surrogate|NUL/);
    }
    // A proper pair (an emoji written as escapes) and an escaped backslash before "u0000" are fine.
    expectOk(await post('{"name": "\\ud83d\\ude00 \\\\u0000", "count": 1}'));
    // Bytes that are not UTF-8 (a surrogate encoded as if it were a character) are refused, not replaced with U+FFFD.
    const raw = Buffer.concat([Buffer.from('{"name": "a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('", "count": 1}')]);
    const invalid = expectError(
      await app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/json' }, payload: raw }),
      400,
      'validation_failed',
    );
    expect(invalid.error).toContain('UTF-8');
  });

  it('refuses a lone surrogate in the text columns of real routes (key names, webhook descriptions, login emails) before the database sees it', async () => {
    const account = await createTestAccount(app.deps.sql);
    const auth = { authorization: `Bearer ${account.fullKey}`, 'content-type': 'application/json' };
    const agent = expectError(
      await app.inject({ method: 'POST', url: '/api/v1/agent-keys', headers: auth, payload: '{"name": "agent \\ud800"}' }),
      400,
      'validation_failed',
    );
    expect(agent.hint).toContain('name');
    const webhook = expectError(
      await app.inject({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: auth,
        payload: '{"url": "https://example.com/\\ud800", "eventTypes": ["key.revoked"]}',
      }),
      400,
      'validation_failed',
    );
    expect(webhook.hint).toContain('url');
    const login = expectError(
      await app.inject({
        method: 'POST',
        url: '/api/auth/login',
        headers: { 'content-type': 'application/json' },
        payload: '{"email": "a\\udc00@example.test", "password": "x"}',
      }),
      400,
      'validation_failed',
    );
    expect(login.hint).toContain('email');
  });

  it('answers malformed JSON with 400 invalid_json', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/__test/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{"name": "a",',
    });
    expectError(res, 400, 'invalid_json');
  });

  it('answers a POST without a body with 400 body_missing', async () => {
    expectError(await app.inject({ method: 'POST', url: '/api/v1/__test/echo' }), 400, 'body_missing');
    const empty = await app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/json' }, payload: '' });
    expectError(empty, 400, 'body_missing');
  });

  it('answers a body that is not an object with 400', async () => {
    for (const payload of ['[1,2]', '"text"', '42', 'null']) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/json' }, payload });
      const body = expectError(res, 400);
      expect(['validation_failed', 'body_missing']).toContain(body.code);
    }
  });

  it('names the offending field when validation fails', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/__test/echo', payload: { name: 'x', count: 'three' } });
    const body = expectError(res, 400, 'validation_failed');
    expect(body.error).toContain('count');
  });

  it('answers an oversized body with 413 and keeps serving', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/__test/echo', payload: { name: 'x'.repeat(10_000), count: 1 } });
    const tooLarge = expectError(res, 413, 'payload_too_large');
    expect(tooLarge.error).toContain('BODY_LIMIT_BYTES');
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/__test/echo', payload: { name: 'x', count: 1 } }));
  });

  it('answers a body nested deeper than JSON_MAX_DEPTH with 400 naming the limit, before anything recursive sees it', async () => {
    const deep = (levels: number) => `{"name":"x","count":1,"extra":${'['.repeat(levels)}${']'.repeat(levels)}}`;
    const send = (payload: string) =>
      app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/json' }, payload });
    for (const levels of [40, 1_500]) {
      const body = expectError(await send(deep(levels)), 400, 'validation_failed');
      expect(body.error).toContain('nests deeper than 32 levels');
    }
    // Brackets inside strings do not count, and a body within the limit passes.
    expectOk(await send(`{"name":"${'['.repeat(100)}","count":1,"extra":[[[]]]}`));
    // Prototype poisoning is still refused by Fastify's own parser underneath.
    expectError(await send('{"name":"x","count":1,"__proto__":{"admin":true}}'), 400);
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/__test/echo', payload: { name: 'x', count: 1 } }));
  });

  it('answers a non-JSON content type with 415', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/__test/echo', headers: { 'content-type': 'application/xml' }, payload: '<a/>' });
    expectError(res, 415, 'unsupported_media_type');
  });

  it('hides internal messages on 500 and names the request id', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/__test/boom' });
    const body = expectError(res, 500, 'internal_error');
    expect(res.body).not.toContain('hunter2');
    expect(res.body).not.toContain('/srv/secret');
    expect(res.body).not.toMatch(/at .*\.ts:\d+/);
    expect(body.hint).toContain(res.headers['x-request-id'] as string);
    // The process keeps serving after the failure.
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/__test/echo', payload: { name: 'y', count: 2 } }));
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const given = await app.inject({ method: 'GET', url: '/api/v1/nothing', headers: { 'x-request-id': 'trace-123' } });
    expect(given.headers['x-request-id']).toBe('trace-123');
    const bad = await app.inject({ method: 'GET', url: '/api/v1/nothing', headers: { 'x-request-id': 'bad id with spaces' } });
    expect(bad.headers['x-request-id']).not.toBe('bad id with spaces');
  });
});
