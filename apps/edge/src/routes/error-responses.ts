import type { RouteOptions } from 'fastify';
import { z } from 'zod';

/** The error shape every failure has; extra fields (402's balance and cost, 429's retryAfter) pass through. */
export const errorSchema = z.looseObject({
  ok: z.literal(false),
  error: z.string().describe('Human-readable message'),
  code: z.string().describe('Stable machine-readable name, e.g. invalid_key, rate_limited'),
  hint: z.string().optional().describe('Suggestion for a fix'),
});

const MEANING: Record<number, string> = {
  400: 'Malformed request (validation_failed, invalid_json, body_missing)',
  401: 'Missing or invalid credentials (missing_credentials, invalid_key, invalid_session, invalid_credentials)',
  402: 'Insufficient balance (insufficient_balance); the body adds balance and cost',
  403: 'Key disabled, revoked or expired, an agent key on an account-only route, or a failed CSRF check',
  404: 'No such resource for this account',
  409: 'Conflicts with the current state (e.g. a revoked key, an existing email)',
  429: 'Rate limited (rate_limited); see Retry-After',
  502: 'The upstream API failed or answered badly (upstream_error); the call is not charged',
  503: 'A dependency is temporarily unavailable (service_unavailable, or upstream_unavailable from the proxy); retry after Retry-After',
};

/** Documented error responses for a route's OpenAPI entry, in the one error shape. */
export function errorResponses<S extends keyof typeof MEANING & number>(...statuses: S[]): Record<S, typeof errorSchema> {
  return Object.fromEntries(statuses.map((status) => [status, errorSchema.describe(MEANING[status] ?? 'Error')])) as Record<S, typeof errorSchema>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route spends the caller's balance (documented with 402; answers 402 when it is short). */
    priced?: boolean;
  }
}

/**
 * Declares the error responses a route can give, from what the route is: input it validates (400),
 * a credential it requires (401, 403), a price (402), a resource named in its path (404) and the
 * rate limits every /api route has (429), and the 503 any route gives while a dependency is down.
 * A route's own declarations (409, 502, ...) are kept.
 * Runs for every route as it is added, so no route can be missing them from the OpenAPI document.
 */
export function declareErrorResponses(route: RouteOptions): void {
  if (!route.url.startsWith('/api/')) return;
  const schema = (route.schema ??= {});
  if ((schema as { hide?: boolean }).hide) return;
  const response = (schema.response ??= {}) as Record<number, unknown>;
  const statuses: (keyof typeof MEANING & number)[] = [];
  if (schema.params || schema.querystring || schema.body || schema.headers) statuses.push(400);
  if ((route.config?.auth ?? 'none') !== 'none') statuses.push(401, 403);
  if (route.config?.priced) statuses.push(402);
  if (schema.params) statuses.push(404);
  if (route.config?.rateLimit !== false) statuses.push(429);
  // Postgres, Redis (logins) or Temporal away: any route may answer 503 with Retry-After.
  statuses.push(503);
  for (const [status, body] of Object.entries(errorResponses(...statuses))) response[Number(status)] ??= body;
}
