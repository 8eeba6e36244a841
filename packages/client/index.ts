import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './api-types.js';

export type { components, operations, paths } from './api-types.js';

/** A typed client of the platform's REST API: every path, parameter and answer from the OpenAPI document. */
export type PlatformClient = Client<paths>;

export interface PlatformClientOptions {
  /** The site root (PUBLIC_URL), e.g. http://127.0.0.1:3000; paths start with /api/v1. */
  baseUrl: string;
  /** An API key or agent key, sent as `Authorization: Bearer <key>` on every call. */
  apiKey?: string;
  /** Extra headers on every call. */
  headers?: Record<string, string>;
  /** Another fetch (tests, proxies, retries). */
  fetch?: typeof globalThis.fetch;
}

/**
 * Creates the typed client (openapi-fetch over the generated `paths`):
 *
 *     const api = createPlatformClient({ baseUrl, apiKey });
 *     const { data, error } = await api.GET('/api/v1/discover', { params: { query: { q: 'send a text message' } } });
 *
 * Each call answers `{ data }` on success or `{ error }` with the platform's error body; `unwrap`
 * turns the latter into a thrown PlatformApiError.
 */
export function createPlatformClient(options: PlatformClientOptions): PlatformClient {
  return createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}), ...options.headers },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** The platform's error body: `{ ok: false, error, code, hint? }` plus details such as balance and cost on a 402. */
export interface PlatformErrorBody {
  ok: false;
  error: string;
  code: string;
  hint?: string;
  [detail: string]: unknown;
}

/** A refused call: the HTTP status and the platform's error code, message and hint. */
export class PlatformApiError extends Error {
  override name = 'PlatformApiError';
  readonly status: number;
  readonly code: string;
  readonly hint: string | undefined;
  readonly body: PlatformErrorBody;

  constructor(status: number, body: PlatformErrorBody) {
    super(`${status} ${body.code}: ${body.error}${body.hint ? ` (${body.hint})` : ''}`);
    this.status = status;
    this.code = body.code;
    this.hint = body.hint;
    this.body = body;
  }
}

/**
 * The data of a successful call, or a PlatformApiError for a refused one:
 * `const { balance } = await unwrap(api.GET('/api/v1/balance'))`.
 */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok && data !== undefined) return data;
  const body = (
    error && typeof error === 'object' ? error : { ok: false, error: String(error ?? response.statusText), code: 'http_error' }
  ) as PlatformErrorBody;
  throw new PlatformApiError(response.status, body);
}
