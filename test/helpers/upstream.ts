import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runApiCli } from '#cli/api-cli';
import { testDatabaseUrl, uniqueId } from './settings.js';

/** What a test upstream saw of one request. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  bodyBytes: number;
  bodySha256: string;
  body: Buffer | null;
}

export interface TestUpstream {
  server: Server;
  url: string;
  seen: SeenRequest[];
  close: () => Promise<void>;
}

/**
 * A real HTTP upstream on 127.0.0.1, port 0. The handler decides the answer; every request's
 * method, URL, headers and body digest are recorded (bodies up to 1 MiB are kept whole).
 */
export async function startUpstream(
  handler: (req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => void | Promise<void> = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"hello":"world"}');
  },
): Promise<TestUpstream> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
      if (bytes <= 1024 * 1024) chunks.push(chunk);
    });
    req.on('end', () => {
      const entry: SeenRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bodyBytes: bytes,
        bodySha256: hash.digest('hex'),
        body: bytes <= 1024 * 1024 ? Buffer.concat(chunks) : null,
      };
      seen.push(entry);
      Promise.resolve(handler(req, res, entry)).catch((error: unknown) => {
        res.destroy(error as Error);
      });
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Registers an upstream as a directory API with the operator CLI, as an operator would. Returns its id. */
export async function registerApi(options: {
  baseUrl: string;
  price: string;
  auth?: string;
  platformKey?: string;
  byokPrice?: string;
  rules?: string[];
  id?: string;
  name?: string;
  description?: string;
}): Promise<string> {
  const id = options.id ?? uniqueId('api-');
  const argv = [
    'add',
    '--id',
    id,
    '--name',
    options.name ?? `Test ${id}`,
    '--base-url',
    options.baseUrl,
    '--price',
    options.price,
    '--auth',
    options.auth ?? 'none',
  ];
  if (options.description !== undefined) argv.push('--description', options.description);
  if (options.platformKey !== undefined) argv.push('--platform-key', options.platformKey);
  if (options.byokPrice !== undefined) argv.push('--byok-price', options.byokPrice);
  for (const rule of options.rules ?? []) argv.push('--rule', rule);
  await runApiCli(argv, { ...process.env, DATABASE_URL: testDatabaseUrl() });
  return id;
}

export const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

export interface RawResponse {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
  /** Set when the response was cut off. */
  aborted: boolean;
}

/**
 * A plain node:http client call: sends the path and headers exactly as given (no URL
 * normalisation, any header), so tests can send what a hostile or sloppy client would.
 */
export async function rawRequest(
  base: string,
  options: { method: string; path: string; headers?: Record<string, string | string[]>; body?: Buffer | string | AsyncIterable<Buffer> },
): Promise<RawResponse> {
  const { request } = await import('node:http');
  const url = new URL(base);
  return new Promise<RawResponse>((resolve, reject) => {
    const headers = { ...options.headers };
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) headers['content-length'] = String(Buffer.byteLength(options.body));
    const req = request({ host: url.hostname, port: url.port, method: options.method, path: options.path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let aborted = false;
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('aborted', () => {
        aborted = true;
      });
      res.on('error', () => {
        aborted = true;
      });
      res.on('close', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), aborted: aborted || !res.complete }),
      );
    });
    req.on('error', reject);
    const body = options.body;
    if (body === undefined) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else {
      void (async () => {
        for await (const chunk of body) {
          if (!req.write(chunk)) await new Promise((r) => req.once('drain', r));
        }
        req.end();
      })().catch((error: unknown) => req.destroy(error as Error));
    }
  });
}

/** Deterministic pseudo-random bytes, produced in chunks, with the digest of the whole. */
export function bigPayload(totalBytes: number, seed = 1): { chunks: () => AsyncGenerator<Buffer>; sha256: string } {
  const chunkSize = 64 * 1024;
  const make = (i: number) =>
    createHash('sha256')
      .update(`${seed}:${i}`)
      .digest()
      .toString('hex')
      .repeat(Math.ceil(chunkSize / 64))
      .slice(0, chunkSize);
  const hash = createHash('sha256');
  const count = Math.ceil(totalBytes / chunkSize);
  const chunkAt = (i: number) => {
    const full = Buffer.from(make(i), 'latin1');
    return i === count - 1 ? full.subarray(0, totalBytes - chunkSize * (count - 1)) : full;
  };
  for (let i = 0; i < count; i += 1) hash.update(chunkAt(i));
  return {
    sha256: hash.digest('hex'),
    chunks: async function* () {
      for (let i = 0; i < count; i += 1) yield chunkAt(i);
    },
  };
}
