import { describe, expect, it } from 'vitest';
import {
  downstreamResponseHeaders,
  guardedLookup,
  isPrivateAddress,
  PrivateUpstreamError,
  proxyTarget,
  upstreamRequestHeaders,
  upstreamUrl,
  withAuthQuery,
  redactingStream,
  redactSecret,
} from '#core/gateway';

describe('proxy upstream rules', () => {
  it('classifies private, loopback and link-local addresses', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'not-an-ip']) {
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
    expect(upstreamUrl('https://api.example.com/v1/', { path: '/items', query: 'a=1' })).toMatchObject({ origin: 'https://api.example.com', path: '/v1/items?a=1' });
    expect(upstreamUrl('https://api.example.com', { path: '', query: null }).path).toBe('/');
    for (const bad of ['/api/v1/proxy/x/..', '/api/v1/proxy/x/a/%2e%2E', '/api/v1/proxy/x/a%2fb', '/api/v1/proxy/x/a\\b', '/api/v1/proxy/x//host', '/api/v1/proxy/x/a%00']) {
      expect(() => proxyTarget(bad, 4), bad).toThrow(/Invalid proxy path/);
    }
  });

  it('drops hop-by-hop, credential and platform headers both ways', () => {
    const out = upstreamRequestHeaders(
      ['Host', 'edge', 'Authorization', 'Bearer k', 'X-API-Key', 'k', 'Cookie', 'c', 'Connection', 'close, X-Drop', 'X-Drop', '1', 'Proxy-Authorization', 'p', 'X-Max-Cost', '1', 'X-Keep', 'yes', 'X-Service-Foo', 'f', 'X-Forwarded-For', 'ip'],
      ['x-upstream-key'],
    );
    expect(out).toEqual(['X-Keep', 'yes']);
    expect(downstreamResponseHeaders({ 'content-type': 'a', 'set-cookie': ['x'], connection: 'x-h', 'x-h': '1', 'transfer-encoding': 'chunked', 'x-service-cost': '0', 'x-ok': '1' })).toEqual({ 'content-type': 'a', 'x-ok': '1' });
    expect(withAuthQuery('a=1&key=mine&b', 'key', 's e')).toBe('a=1&b&key=s%20e');
  });
});

describe('redactingStream', () => {
  it('redacts a secret split across any chunk boundary, raw and URL-encoded', async () => {
    const secret = 'k3y/with+chars&more';
    const text = `a ${secret} b ${encodeURIComponent(secret)} c ${secret}`;
    for (let size = 1; size <= text.length; size += 3) {
      const stream = redactingStream(secret);
      const out: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => out.push(chunk));
      const done = new Promise((resolve) => stream.on('end', resolve));
      for (let i = 0; i < text.length; i += size) stream.write(Buffer.from(text.slice(i, i + size)));
      stream.end();
      await done;
      expect(Buffer.concat(out).toString(), `chunks of ${size}`).toBe('a [redacted] b [redacted] c [redacted]');
    }
    expect(redactSecret(`x${secret}y`, secret)).toBe('x[redacted]y');
  });
});
