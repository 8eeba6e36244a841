/**
 * The dashboard's only way to the server: the same /api/v1 endpoints agents use, through the typed
 * client generated from the edge's OpenAPI document (packages/client: openapi-fetch over the
 * generated `paths`), so a route's schema change that breaks a page fails the typecheck. Calls are
 * authenticated by the HttpOnly session cookie; changes echo the readable csrf_token cookie in
 * X-CSRF-Token, as the edge requires for cookie-authenticated requests.
 */
import { createPlatformClient, type paths } from '#client';
import { peopleError } from './wording';

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

/** The typed client: `client.GET('/api/v1/balance')`, paths, parameters and answers from the OpenAPI document. */
export const client = createPlatformClient({ baseUrl: window.location.origin, headers: { accept: 'application/json' } });
client.use({
  onRequest({ request }) {
    if (request.method === 'GET' || request.method === 'HEAD') return undefined;
    const csrf = readCookie(CSRF_COOKIE);
    if (csrf) request.headers.set('x-csrf-token', csrf);
    return request;
  },
});

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type SuccessStatus = 200 | 201 | 202;
type JsonOf<Response> = Response extends { content: { 'application/json': infer Body } } ? Body : never;
type SuccessBody<Operation> = Operation extends { responses: infer Responses } ? JsonOf<Responses[keyof Responses & SuccessStatus]> : never;

/**
 * The JSON body of a route's successful answer, from the generated types:
 * `Answer<'/api/v1/webhooks', 'get'>['webhooks'][number]` is one webhook endpoint as listed.
 */
export type Answer<Path extends keyof paths, M extends Method = 'get'> = SuccessBody<NonNullable<paths[Path][M]>>;

/** What an openapi-fetch call resolves to (either member of its union). */
export interface CallResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

const text = (value: unknown) => (typeof value === 'string' ? value : null);

/**
 * The data of a successful call, or an ApiError carrying the platform's error shape
 * `{ ok: false, error, code, hint }` (and Retry-After) for a refused one; an unreachable server is
 * an ApiError too. An aborted call rethrows the AbortError for the caller to ignore.
 *
 *     const { balance } = await call(client.GET('/api/v1/balance'));
 */
export async function call<T>(request: Promise<CallResult<T>>): Promise<T> {
  let result: CallResult<T>;
  try {
    result = await request;
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new ApiError('The server could not be reached. Check your connection and try again.', 0, 'network_error', null, null);
  }
  const { data, error, response } = result;
  const ok = response.ok && data !== null && typeof data === 'object' && (data as { ok?: unknown }).ok === true;
  if (ok) return data;
  const body = error !== null && typeof error === 'object' ? (error as Record<string, unknown>) : {};
  const retry = Number(response.headers.get('retry-after'));
  throw new ApiError(
    text(body.error) ?? `The server answered ${response.status} ${response.statusText}`.trim(),
    response.status,
    text(body.code) ?? 'unknown',
    text(body.hint),
    Number.isFinite(retry) && retry > 0 ? retry : null,
  );
}

/** Absolute URL path of a route, for what the typed client cannot make (an EventSource's address). */
export const apiPath = (path: string) => (path.startsWith('/api/') ? path : `/api/v1${path}`);

const sentence = (text: string) => {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
};

/** An error as sentences a person can act on: the server's `error`, then its `hint`, where they are worded for people (see wording.ts). */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.code === 'rate_limited' || error.status === 429) {
      const wait = error.retryAfterSeconds ? ` Wait ${error.retryAfterSeconds} seconds, then try again.` : ' Wait a moment, then try again.';
      return `Too many attempts.${wait}`;
    }
    if (error.status === 401 && error.code !== 'invalid_credentials') return 'Your session has ended. Sign in again.';
    return peopleError({ status: error.status, code: error.code, message: error.message, hint: error.hint });
  }
  if (error instanceof Error) return sentence(error.message);
  return 'Something went wrong. Try again.';
}

export const isUnauthenticated = (error: unknown) => error instanceof ApiError && error.status === 401;
