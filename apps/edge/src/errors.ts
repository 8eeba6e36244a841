import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { ERROR_STATUS, PlatformError, type ErrorCode } from '#core/platform';

export interface ErrorBody {
  ok: false;
  error: string;
  code: ErrorCode;
  hint?: string;
  [extra: string]: unknown;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Answers unknown paths that are pages (the dashboard's client-side routes); null to fall through to the JSON 404. */
    htmlFallback: ((request: FastifyRequest, reply: FastifyReply) => FastifyReply | null) | null;
  }
}

export function errorBody(error: PlatformError): ErrorBody {
  return {
    ok: false,
    error: error.message,
    code: error.code,
    ...(error.hint === undefined ? {} : { hint: error.hint }),
    ...(error.details ?? {}),
  };
}

export function sendError(reply: FastifyReply, error: PlatformError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(ERROR_STATUS[error.code]).type('application/json; charset=utf-8').send(errorBody(error));
}

function describeIssues(issues: ReadonlyArray<{ instancePath?: string; message?: string; params?: unknown }>, where: string): string {
  return issues
    .slice(0, 5)
    .map((issue) => {
      const path = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
      return `${path ? `${where}.${path}` : where}: ${issue.message ?? 'is invalid'}`;
    })
    .join('; ');
}

/** Maps whatever was thrown to a PlatformError. Only PlatformErrors and known Fastify errors keep their message. */
export function toPlatformError(error: FastifyError | Error): PlatformError {
  if (error instanceof PlatformError) return error;
  const err = error as FastifyError;

  if (hasZodFastifySchemaValidationErrors(err)) {
    const where = err.validationContext ?? 'body';
    return new PlatformError('validation_failed', `Invalid request ${describeIssues(err.validation, where)}`, {
      hint: 'See /api/v1/openapi.json for the expected shape of this request.',
    });
  }
  if (isResponseSerializationError(err)) {
    return new PlatformError('internal_error', 'Internal error', { cause: err });
  }
  switch (err.code) {
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new PlatformError('body_missing', 'Request body is empty', { hint: 'Send a JSON object with Content-Type: application/json.' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new PlatformError('invalid_json', 'Request body is not valid JSON', {
        hint: 'Check the body for a syntax error; it must be a JSON object.',
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PlatformError('payload_too_large', 'Request body is larger than the limit (BODY_LIMIT_BYTES)', { hint: 'Send a smaller body.' });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new PlatformError('unsupported_media_type', 'Unsupported Content-Type', { hint: 'Send the body as application/json.' });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new PlatformError('validation_failed', 'Content-Length does not match the body');
    case 'FST_ERR_VALIDATION':
      return new PlatformError('validation_failed', `Invalid request: ${err.message}`);
  }
  if (err instanceof SyntaxError && err.statusCode === 400) {
    return new PlatformError('invalid_json', 'Request body is not valid JSON', {
      hint: 'Check the body for a syntax error; it must be a JSON object.',
    });
  }
  if (err.statusCode === 429) {
    return new PlatformError('rate_limited', 'Too many requests', { hint: 'Wait for the number of seconds in Retry-After, then retry.' });
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    const code = (Object.entries(ERROR_STATUS).find(([, status]) => status === err.statusCode)?.[0] ?? 'validation_failed') as ErrorCode;
    return new PlatformError(code, err.message || 'Bad request');
  }
  if (isDatabaseUnavailable(err)) {
    return new PlatformError('service_unavailable', 'The database is temporarily unavailable', {
      hint: 'Retry after the number of seconds in Retry-After.',
      headers: { 'Retry-After': '5' },
      cause: err,
    });
  }
  return new PlatformError('internal_error', 'Internal error', { cause: err });
}

/** Postgres unreachable, gone mid-query or too slow: a 503 the caller may retry, not a 500. */
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE']);
const UNAVAILABLE_POSTGRES = new Set(['CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED']);
function isDatabaseUnavailable(error: { code?: unknown; errno?: unknown }): boolean {
  const code = typeof error.code === 'string' ? error.code : '';
  // 57P01-57P03: admin shutdown, crash shutdown, cannot connect now; 57014: statement timeout.
  return UNAVAILABLE_ERRNO.has(code) || UNAVAILABLE_POSTGRES.has(code) || /^57P0[123]$/.test(code) || code === '57014' || code === '53300';
}

/** The one error handler: every failure leaves as `{ ok: false, error, code, hint? }`. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = toPlatformError(error);
    if (mapped.code === 'internal_error') {
      request.log.error({ err: error }, 'unhandled error');
      // A 5xx never leaks an internal message or stack; the request id ties it to the log line.
      return sendError(
        reply,
        new PlatformError('internal_error', 'Internal error', { hint: `Retry later; if it persists, report request id ${request.id}.` }),
      );
    }
    if (mapped.status >= 500) request.log.warn({ code: mapped.code }, mapped.message);
    return sendError(reply, mapped);
  });

  // Every route's pattern, so a known path asked with another method answers 405 with Allow.
  const routes: { pattern: RegExp; methods: string[]; params: number }[] = [];
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/api/')) return;
    const source = route.url
      .replace(/\/$/, '')
      .split(/(:[A-Za-z0-9_]+|\*)/)
      .map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    routes.push({ pattern: new RegExp(`^${source}/?$`), methods: [route.method].flat(), params: route.url.split(/:[A-Za-z0-9_]+|\*/).length - 1 });
  });
  // The most specific routes that match, as the router prefers them: /connect/requests (static) over
  // /connect/:apiId, whose methods belong to another resource.
  const allowedMethods = (path: string) => {
    const matching = routes.filter((route) => route.pattern.test(path));
    const fewest = Math.min(...matching.map((route) => route.params));
    return [...new Set(matching.filter((route) => route.params === fewest).flatMap((route) => route.methods))];
  };

  const methodNotAllowed = (request: FastifyRequest): PlatformError | null => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = allowedMethods(path);
    if (allowed.length === 0) return null;
    return new PlatformError('method_not_allowed', `${request.method} is not allowed on ${path}`, {
      hint: `Use ${allowed.join(', ')}; see /api/v1/openapi.json.`,
      headers: { Allow: allowed.join(', ') },
    });
  };
  // Before any body is read: a method no route has (QUERY, SEARCH, ...) on a known path is a 405,
  // not a complaint about its Content-Type.
  // (With `done`, not async: it runs on every request, and a matched route passes at once.)
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.is404) return done();
    const refused = methodNotAllowed(request);
    // An answer sent from a hook ends the request there: `done` is not called.
    if (refused) return void sendError(reply, refused);
    done();
  });

  app.decorate('htmlFallback', null);
  app.setNotFoundHandler((request, reply) => {
    const page = app.htmlFallback?.(request, reply);
    if (page) return page;
    const path = request.url.split('?')[0] ?? '/';
    const refused = methodNotAllowed(request);
    if (refused) return sendError(reply, refused);
    return sendError(
      reply,
      new PlatformError('not_found', `No route for ${request.method} ${path}`, {
        hint: 'The API root is /api/v1; see /api/v1/openapi.json for every route.',
      }),
    );
  });
}
