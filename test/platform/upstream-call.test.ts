import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChunkWriter, UpstreamResponse } from '#core/gateway';
import { UpstreamCall } from '#edge/http/upstream-call';

// The metered call's request to its upstream (apps/edge/src/http/upstream-call.ts), against a real
// HTTP server through undici's Agent as the edge sends it: an answer read either way, backpressure,
// the deadline's stop in each phase, and the difference between an upstream that breaks off and a
// reader that stops.

const MB = 1024 * 1024;
let server: Server;
let origin: string;
const agent = new Agent({ keepAliveTimeout: 10_000, connections: 8, headersTimeout: 10_000, bodyTimeout: 10_000 });
/** Sockets the upstream saw closed, by path. */
const closed: string[] = [];

function handler(req: IncomingMessage, res: ServerResponse) {
  req.socket.once('close', () => closed.push(req.url ?? ''));
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (req.url === '/small') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    } else if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(4 * MB) });
      res.end(Buffer.alloc(4 * MB, 7));
    } else if (req.url === '/echo') {
      res.end(Buffer.concat(chunks));
    } else if (req.url === '/break') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(MB) });
      res.write(Buffer.alloc(1024, 1));
      setTimeout(() => req.socket.destroy(), 50);
    } else if (req.url === '/trickle') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first ');
      const timer = setInterval(() => res.write('more '), 20);
      res.once('close', () => clearInterval(timer));
    }
    // '/silent' never answers.
  });
}

/** Starts a call as the edge's gateway plugin does (the tests stand for the call's deadline by calling abort). */
function send(path: string, options: { method?: string; body?: Readable | null } = {}) {
  const call = new UpstreamCall(options.body ?? null);
  agent.dispatch({ origin, path, method: (options.method ?? 'GET') as 'GET', headers: ['accept', '*/*'], body: options.body ?? null }, call);
  return call;
}

/** A writer like the REST sink's: records what it got; full after `capacity` bytes until drained. */
function recordingWriter(capacity = Infinity) {
  const got: Buffer[] = [];
  let buffered = 0;
  const state = { ended: false, failed: null as Error | null, refused: 0 };
  const writer: ChunkWriter = {
    write(chunk) {
      got.push(chunk);
      buffered += chunk.length;
      if (buffered < capacity) return true;
      state.refused += 1;
      return false;
    },
    end() {
      state.ended = true;
    },
    fail(error) {
      state.failed = error;
    },
  };
  return { writer, got, state, drain: () => (buffered = 0), bytes: () => got.reduce((n, c) => n + c.length, 0) };
}

/** A stream read to its end, as text. */
async function textOf(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

async function until(check: () => boolean, what: string, ms = 5_000) {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

beforeAll(async () => {
  server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('a metered call’s request to its upstream', () => {
  it('holds a small answer that arrived with its headers until a writer takes it, and counts what it handed over', async () => {
    const call = send('/small');
    const answer: UpstreamResponse = await call.response;
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-type']).toBe('application/json');
    // Give the body time to arrive before anyone reads it.
    await new Promise((r) => setTimeout(r, 50));
    const { writer, got, state } = recordingWriter();
    call.sendTo(writer);
    await until(() => state.ended, 'the end');
    expect(Buffer.concat(got).toString()).toBe('{"ok":true}');
    expect(call.bytesSent).toBe(11);
    expect(call.broken).toBe(false);
  });

  it('gives the same answer as a stream, made after the answer ended', async () => {
    const call = send('/small');
    await call.response;
    await new Promise((r) => setTimeout(r, 50));
    expect(await textOf(call.stream())).toBe('{"ok":true}');
  });

  it('waits for resume when the writer is full, and delivers 4 MB whole', async () => {
    const call = send('/big');
    await call.response;
    const { writer, state, drain, bytes } = recordingWriter(256 * 1024);
    call.sendTo(writer);
    await until(() => state.refused > 0, 'a full writer');
    const atRefusal = bytes();
    // Paused: nothing more arrives while the writer is full (a chunk already parsed may still land).
    await new Promise((r) => setTimeout(r, 100));
    expect(bytes() - atRefusal).toBeLessThan(256 * 1024);
    while (!state.ended) {
      drain();
      call.resume();
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(bytes()).toBe(4 * MB);
    expect(call.bytesSent).toBe(4 * MB);
    expect(state.refused).toBeGreaterThan(1);
  });

  it('forwards a request body as a stream', async () => {
    const call = send('/echo', { method: 'POST', body: Readable.from([Buffer.from('abc'), Buffer.from('def')]) });
    await call.response;
    expect(await textOf(call.stream())).toBe('abcdef');
  });

  it('marks an upstream that breaks off mid-answer as broken and tells the writer', async () => {
    const call = send('/break');
    await call.response;
    const { writer, state, bytes } = recordingWriter();
    call.sendTo(writer);
    await until(() => state.failed !== null, 'the failure');
    expect(bytes()).toBe(1024);
    expect(state.ended).toBe(false);
    expect(call.broken).toBe(true);
  });

  it('is not broken when its reader stops it: the upstream’s connection is closed and nothing more is written', async () => {
    const call = send('/trickle');
    await call.response;
    const { writer, state, bytes } = recordingWriter();
    call.sendTo(writer);
    await until(() => bytes() > 6, 'some of the answer');
    call.destroy();
    await until(() => closed.includes('/trickle'), 'the upstream seeing its connection closed');
    const after = bytes();
    await new Promise((r) => setTimeout(r, 100));
    expect(bytes()).toBe(after);
    expect(call.broken).toBe(false);
    expect(state.failed).toBeNull();
  });

  it('is not broken when its stream is destroyed by its reader', async () => {
    const call = send('/trickle');
    await call.response;
    const stream = call.stream();
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    stream.destroy();
    await until(() => closed.filter((path) => path === '/trickle').length === 2, 'the upstream seeing its connection closed');
    expect(call.broken).toBe(false);
  });

  it('stops a request waiting for its answer with the deadline’s reason, and destroys the body it was sending', async () => {
    const body = new Readable({ read() {} });
    body.push('part of a body');
    const call = send('/silent', { method: 'POST', body });
    await new Promise((r) => setTimeout(r, 100));
    const reason = new Error('deadline passed');
    call.abort(reason);
    await expect(call.response).rejects.toBe(reason);
    expect(body.destroyed).toBe(true);
  });

  it('stops a request the deadline ended before undici started it', async () => {
    const call = new UpstreamCall(null);
    const reason = new Error('deadline passed');
    call.abort(reason);
    agent.dispatch({ origin, path: '/small', method: 'GET', headers: [] }, call);
    await expect(call.response).rejects.toBe(reason);
  });

  it('stops an answer mid-way at the deadline: its stream ends with the reason, and the call is not broken', async () => {
    const call = send('/trickle');
    await call.response;
    const stream = call.stream();
    const failed = new Promise<Error>((resolve) => stream.once('error', resolve));
    stream.resume();
    const reason = new Error('deadline passed');
    call.abort(reason);
    expect(await failed).toBe(reason);
    expect(call.broken).toBe(false);
  });
});
