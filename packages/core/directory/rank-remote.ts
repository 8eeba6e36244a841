/**
 * Search and discovery ranked by the directory ranking process (workers/directory/main.ts), which
 * every edge on a machine asks over HTTP on a private port: one copy of the index, WordNet and the
 * embedding model serves them all, and an edge holds none (docs/decisions/directory-ranking-process.md).
 *
 * The wire: `POST /search` and `POST /discover` with the request (SearchRequest, DiscoverRequest) as
 * JSON; 200 carries the answer's JSON bytes exactly as the edge sends them. A PlatformError comes back
 * with its status and `{ ok: false, error, code, hint?, details?, headers? }`; any other failure as 500
 * `{ failure: { message, code } }`, which the edge rethrows with the same `code` (so a database that
 * is down still answers 503 through the edge's error handler). `GET /health` answers 200 while the
 * process serves.
 *
 * When the ranking process does not answer (not started, restarting, stopped), search and discovery
 * answer 503 `service_unavailable` with a hint and Retry-After, the edge's /health reports
 * `checks.directory: "down"`, and everything else (browsing, the proxy, MCP's other tools) goes on.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Pool, errors as undiciErrors } from 'undici';
import { ERROR_STATUS, PlatformError, type ErrorCode } from '#core/platform';
import type { DiscoverRequest, SearchRequest } from './answers.js';
import type { DirectoryRanking, RankPoolLog } from './rank-pool.js';

/** A request body larger than this is refused (a caller's holdings are a few hundred ids at most). */
const MAX_BODY_BYTES = 1_000_000;
/** An answer slower than this is given up: the first request after a start waits for the index load (a few seconds). */
const ANSWER_TIMEOUT_MS = 30_000;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const unavailable = (cause: unknown) =>
  new PlatformError('service_unavailable', 'Search and discovery are unavailable: the directory ranking process does not answer', {
    hint: 'Retry in a few seconds. Browsing (GET /api/v1/apis without q, /categories) and every other endpoint still work; operators: start workers/directory/main.ts (DIRECTORY_RANK_URL).',
    headers: { 'Retry-After': '5' },
    cause,
  });

/** Whether an undici error means the ranking process could not be reached or went away mid-answer. */
function isConnectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return (
    error instanceof undiciErrors.SocketError ||
    error instanceof undiciErrors.ConnectTimeoutError ||
    error instanceof undiciErrors.HeadersTimeoutError ||
    error instanceof undiciErrors.BodyTimeoutError ||
    error instanceof undiciErrors.ClientClosedError ||
    error instanceof undiciErrors.ClientDestroyedError ||
    (typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ETIMEDOUT', 'EAI_AGAIN'].includes(code))
  );
}

/** The edge's side: a DirectoryRanking answered by the ranking process at `url`, over kept-alive connections. */
export class RemoteRanking implements DirectoryRanking {
  private readonly pool: Pool;

  constructor(
    readonly url: string,
    options: { connections?: number } = {},
  ) {
    this.pool = new Pool(new URL(url).origin, {
      connections: options.connections ?? 64,
      keepAliveTimeout: 30_000,
      headersTimeout: ANSWER_TIMEOUT_MS,
      bodyTimeout: ANSWER_TIMEOUT_MS,
      connectTimeout: 2_000,
    });
  }

  search(request: SearchRequest): Promise<Buffer> {
    return this.ask('/search', request);
  }

  discover(request: DiscoverRequest): Promise<Buffer> {
    return this.ask('/discover', request);
  }

  /** Whether the ranking process answers its /health (the edge's GET /health reports it). */
  async check(): Promise<void> {
    const res = await this.pool.request({ method: 'GET', path: '/health', headersTimeout: 1_500, bodyTimeout: 1_500 });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`the directory ranking process answered ${res.statusCode}`);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  private async ask(path: string, request: SearchRequest | DiscoverRequest): Promise<Buffer> {
    let res;
    try {
      res = await this.pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
    } catch (error) {
      throw isConnectionFailure(error) ? unavailable(error) : error;
    }
    let body: Buffer;
    try {
      body = Buffer.from(await res.body.arrayBuffer());
    } catch (error) {
      throw isConnectionFailure(error) ? unavailable(error) : error;
    }
    if (res.statusCode === 200) return body;
    let reply: {
      code?: unknown;
      error?: unknown;
      hint?: unknown;
      details?: unknown;
      headers?: unknown;
      failure?: { message?: unknown; code?: unknown };
    };
    try {
      reply = JSON.parse(body.toString('utf8')) as typeof reply;
    } catch {
      throw new Error(`the directory ranking process answered ${res.statusCode} without JSON`);
    }
    if (typeof reply.code === 'string' && reply.code in ERROR_STATUS) {
      throw new PlatformError(reply.code as ErrorCode, String(reply.error ?? ''), {
        ...(typeof reply.hint === 'string' ? { hint: reply.hint } : {}),
        ...(isObject(reply.details) ? { details: reply.details } : {}),
        ...(isObject(reply.headers) ? { headers: reply.headers as Record<string, string> } : {}),
      });
    }
    const error = new Error(String(reply.failure?.message ?? `the directory ranking process answered ${res.statusCode}`)) as Error & {
      code?: string;
    };
    if (typeof reply.failure?.code === 'string') error.code = reply.failure.code;
    throw error;
  }
}

async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
}

/**
 * The ranking process's side: an HTTP server answering `ranking` (its own index, on its event loop or
 * in its RankPool) for the edges. Requests come from edges that validated them already; the shapes
 * are checked only as far as ranking needs (a malformed one is a 400, never a crash).
 */
export function rankingServer(ranking: DirectoryRanking, log: RankPoolLog): Server {
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET' && req.url === '/health') return sendJson(res, 200, { ok: true, status: 'healthy' });
      const op = req.method === 'POST' && (req.url === '/search' || req.url === '/discover') ? req.url.slice(1) : null;
      if (op === null) {
        req.resume();
        return sendJson(res, 404, { ok: false, error: 'Not found', code: 'not_found', hint: 'POST /search, POST /discover or GET /health.' });
      }
      const body = await readBody(req);
      if (body === null) return sendJson(res, 413, { ok: false, error: 'Request too large', code: 'payload_too_large' });
      let request: unknown;
      try {
        request = JSON.parse(body.toString('utf8'));
      } catch {
        return sendJson(res, 400, { ok: false, error: 'The body is not JSON', code: 'invalid_json' });
      }
      const text = op === 'search' ? (request as { q?: unknown })?.q : (request as { text?: unknown })?.text;
      if (!isObject(request) || typeof text !== 'string' || typeof request.limit !== 'number')
        return sendJson(res, 400, { ok: false, error: `Not a ${op} request`, code: 'validation_failed' });
      try {
        const answer =
          op === 'search' ? await ranking.search(request as unknown as SearchRequest) : await ranking.discover(request as unknown as DiscoverRequest);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer);
      } catch (error) {
        if (error instanceof PlatformError) {
          return sendJson(res, error.status, {
            ok: false,
            error: error.message,
            code: error.code,
            hint: error.hint,
            details: error.details,
            headers: error.headers,
          });
        }
        const err = error as { message?: unknown; code?: unknown };
        log.warn({ err: error, op }, 'directory ranking failed');
        sendJson(res, 500, { failure: { message: String(err?.message ?? error), code: typeof err?.code === 'string' ? err.code : undefined } });
      }
    })().catch((error: unknown) => {
      log.warn({ err: error }, 'directory ranking: answering failed');
      if (!res.headersSent) sendJson(res, 500, { failure: { message: 'internal error' } });
      else res.destroy();
    });
  });
  // Edges keep their connections open between requests (undici keeps them 30 s; the server a little longer).
  server.keepAliveTimeout = 35_000;
  server.headersTimeout = 40_000;
  return server;
}
