import { describe, expect, it } from 'vitest';
import {
  downstreamResponseHeaders,
  droppedRequestHeaders,
  guardedLookup,
  isPrivateAddress,
  PrivateUpstreamError,
  proxyTarget,
  upstreamRequestHeaders,
  upstreamUrl,
  withAuthQuery,
  SecretRedactor,
} from '#core/gateway';

describe('proxy upstream rules', () => {
  it('classifies private, loopback and link-local addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      'not-an-ip',
    ]) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(isPrivateAddress(a), a).toBe(false);
  });

  it('refuses private answers at connect time (DNS rebinding guard)', async () => {
    const error = await new Promise<unknown>((resolve) => guardedLookup('localhost', {}, (err) => resolve(err)));
    expect(error).toBeInstanceOf(PrivateUpstreamError);
  });

  it('keeps the path remainder and query as sent, and stays under the base URL', () => {
    expect(proxyTarget('/api/v1/proxy/x/a/b%20c?q=%41&r', 4)).toEqual({ path: '/a/b%20c', query: 'q=%41&r' });
    expect(proxyTarget('/api/v1/proxy/x/', 4)).toEqual({ path: '/', query: null });
    expect(proxyTarget('/api/v1/proxy/x', 4)).toEqual({ path: '', query: null });
    expect(proxyTarget('/api/v1/proxy/x?a=/b', 4)).toEqual({ path: '', query: 'a=/b' });
    expect(proxyTarget('/api/v1/proxy/x/.well-known/a.b/..c', 4).path).toBe('/.well-known/a.b/..c');
    expect(proxyTarget('http://edge.example/api/v1/proxy/x/a?q', 4)).toEqual({ path: '/a', query: 'q' });
    expect(upstreamUrl('https://api.example.com/v1/', { path: '/items', query: 'a=1' })).toMatchObject({
      origin: 'https://api.example.com',
      path: '/v1/items?a=1',
    });
    expect(upstreamUrl('https://api.example.com', { path: '', query: null }).path).toBe('/');
    expect(upstreamUrl('https://api.example.com/v1', { path: "/a;b=c/d@e:f/!$&'()*+,~%20", query: 'x=/../..' }).path).toBe(
      "/v1/a;b=c/d@e:f/!$&'()*+,~%20?x=/../..",
    );
    // Anything but plain path characters is parsed as the upstream would, and must stay under the base path.
    expect(upstreamUrl('https://api.example.com/v1', { path: '/a b', query: null }).path).toBe('/v1/a b');
    for (const escape of ['/.\t./x', '/.\n./x', '/x/.\t./..\r/y', '/../x', '/%2e%2e/x', 'x']) {
      expect(() => upstreamUrl('https://api.example.com/v1', { path: escape, query: null }), JSON.stringify(escape)).toThrow(
        /leaves the API base URL/,
      );
    }
    expect(() => upstreamUrl('https://api.example.com', { path: '//evil.example/x', query: null })).toThrow(/leaves the API base URL/);
    for (const bad of [
      '/api/v1/proxy/x/..',
      '/api/v1/proxy/x/a/./b',
      '/api/v1/proxy/x/.',
      '/api/v1/proxy/x/a/%2E',
      '/api/v1/proxy/x/a/%zz',
      '/api/v1/proxy/x/a/%2e%2E',
      '/api/v1/proxy/x/a%2fb',
      '/api/v1/proxy/x/a\\b',
      '/api/v1/proxy/x//host',
      '/api/v1/proxy/x/a%00',
    ]) {
      expect(() => proxyTarget(bad, 4), bad).toThrow(/Invalid proxy path/);
    }
  });

  it('drops hop-by-hop, credential and platform headers both ways', () => {
    const out = upstreamRequestHeaders(
      [
        'Host',
        'edge',
        'Authorization',
        'Bearer k',
        'X-API-Key',
        'k',
        'Cookie',
        'c',
        'Connection',
        'close, X-Drop',
        'X-Drop',
        '1',
        'Proxy-Authorization',
        'p',
        'X-Max-Cost',
        '1',
        'X-Keep',
        'yes',
        'X-Service-Foo',
        'f',
        'X-Forwarded-For',
        'ip',
      ],
      ['x-upstream-key'],
    );
    expect(out).toEqual(['X-Keep', 'yes']);
    expect(
      downstreamResponseHeaders({
        'content-type': 'a',
        'set-cookie': ['x'],
        connection: 'x-h',
        'x-h': '1',
        'transfer-encoding': 'chunked',
        'x-service-cost': '0',
        'x-ok': '1',
      }),
    ).toEqual({ 'content-type': 'a', 'x-ok': '1' });
    expect(withAuthQuery('a=1&key=mine&b', 'key', 's e')).toBe('a=1&b&key=s%20e');
  });
});

describe('planned request headers', () => {
  it("are one set per API and case, which the caller's Connection header never changes", () => {
    const api = { id: 'x', baseUrl: 'https://api.example.com' };
    const plan = (authHeader: [string, string] | null, secretKey: boolean) =>
      ({ api, authHeader, platformKey: secretKey, secretKey }) as unknown as Parameters<typeof droppedRequestHeaders>[0];
    const noBody = droppedRequestHeaders(plan(['X-Key', 'k'], true), false);
    expect([...noBody].sort()).toEqual(['accept-encoding', 'content-length', 'x-key']);
    expect(droppedRequestHeaders(plan(['X-Key', 'other'], true), false)).toBe(noBody);
    expect([...droppedRequestHeaders(plan(['X-Key', 'k'], false), true)]).toEqual(['x-key']);
    expect([...droppedRequestHeaders(plan(null, false), true)]).toEqual([]);
    const raw = ['X-Key', 'mine', 'Connection', 'X-Hop', 'X-Hop', '1', 'Content-Length', '3', 'Accept-Encoding', 'gzip', 'X-Keep', 'yes'];
    expect(upstreamRequestHeaders(raw, noBody)).toEqual(['X-Keep', 'yes']);
    expect(noBody.has('x-hop')).toBe(false);
    expect(upstreamRequestHeaders(raw, ['X-KEY'])).toEqual(['Content-Length', '3', 'Accept-Encoding', 'gzip', 'X-Keep', 'yes']);
    expect(
      downstreamResponseHeaders({
        connection: ['close', 'x-a'],
        'x-a': '1',
        'x-b': '2',
        'proxy-x': '3',
        'x-ratelimit-limit': '4',
        'x-request-id': '5',
      }),
    ).toEqual({
      'x-b': '2',
      // The upstream's own limits and request id reach the caller renamed, beside the edge's (docs/decisions/upstream-signals.md).
      'X-Upstream-RateLimit-Limit': '4',
      'X-Upstream-Request-Id': '5',
    });
  });
});

describe('SecretRedactor.stream', () => {
  it('redacts a secret split across any chunk boundary, raw and URL-encoded', async () => {
    const secret = 'k3y/with+chars&more';
    const text = `a ${secret} b ${encodeURIComponent(secret)} c ${secret}`;
    for (let size = 1; size <= text.length; size += 3) {
      const stream = new SecretRedactor([secret]).stream();
      const out: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => out.push(chunk));
      const done = new Promise((resolve) => stream.on('end', resolve));
      for (let i = 0; i < text.length; i += size) stream.write(Buffer.from(text.slice(i, i + size)));
      stream.end();
      await done;
      expect(Buffer.concat(out).toString(), `chunks of ${size}`).toBe('a [redacted] b [redacted] c [redacted]');
    }
    expect(new SecretRedactor([secret]).redactText(`x${secret}y`)).toBe('x[redacted]y');
  });
});
