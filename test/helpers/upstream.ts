import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runApiCli } from '../../db/src/cli/api-cli.js';
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
export async function registerApi(options: { baseUrl: string; price: string; auth?: string; platformKey?: string; byokPrice?: string; rules?: string[]; id?: string }): Promise<string> {
  const id = options.id ?? uniqueId('api-');
  const argv = ['add', '--id', id, '--name', `Test ${id}`, '--base-url', options.baseUrl, '--price', options.price, '--auth', options.auth ?? 'none'];
  if (options.platformKey !== undefined) argv.push('--platform-key', options.platformKey);
  if (options.byokPrice !== undefined) argv.push('--byok-price', options.byokPrice);
  for (const rule of options.rules ?? []) argv.push('--rule', rule);
  await runApiCli(argv, { ...process.env, DATABASE_URL: testDatabaseUrl() });
  return id;
}

export const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
