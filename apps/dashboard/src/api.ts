/**
 * The dashboard's only way to the server: the same /api/v1 endpoints agents use, authenticated by
 * the HttpOnly session cookie. Changes echo the readable csrf_token cookie in X-CSRF-Token, as the
 * edge requires for cookie-authenticated requests.
 */

export const CSRF_COOKIE = 'csrf_token';

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly hint: string | null,
    readonly retryAfterSeconds: number | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

function readCookie(name: string): string | null {
  for (const part of document.cookie.split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return null;
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Absolute API path: `/keys` becomes `/api/v1/keys`; `/api/auth/...` stays as it is. */
export const apiPath = (path: string) => (path.startsWith('/api/') ? path : `/api/v1${path}`);

export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') {
    const csrf = readCookie(CSRF_COOKIE);
    if (csrf) headers['x-csrf-token'] = csrf;
  }
  let response: Response;
  try {
    response = await fetch(apiPath(path), {
      method,
      headers,
      credentials: 'same-origin',
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ApiError('The server could not be reached. Check your connection and try again.', 0, 'network_error', null, null);
  }
  let body: Record<string, unknown> | null = null;
  try {
    body = (await response.json()) as Record<string, unknown>;
  } catch {
    body = null;
  }
  if (!response.ok || body === null || body.ok !== true) {
    const retry = Number(response.headers.get('retry-after'));
    throw new ApiError(
      typeof body?.error === 'string' ? body.error : `The server answered ${response.status} ${response.statusText}`.trim(),
      response.status,
      typeof body?.code === 'string' ? body.code : 'unknown',
      typeof body?.hint === 'string' ? body.hint : null,
      Number.isFinite(retry) && retry > 0 ? retry : null,
    );
  }
  return body as T;
}

const sentence = (text: string) => {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
};

/** An error as sentences a person can act on: the server's `error`, then its `hint`. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.code === 'rate_limited' || error.status === 429) {
      const wait = error.retryAfterSeconds ? ` Wait ${error.retryAfterSeconds} seconds, then try again.` : ' Wait a moment, then try again.';
      return `Too many attempts.${wait}`;
    }
    if (error.status === 401 && error.code !== 'invalid_credentials') return 'Your session has ended. Sign in again.';
    return error.hint ? `${sentence(error.message)} ${sentence(error.hint)}` : sentence(error.message);
  }
  if (error instanceof Error) return sentence(error.message);
  return 'Something went wrong. Try again.';
}

export const isUnauthenticated = (error: unknown) => error instanceof ApiError && error.status === 401;
