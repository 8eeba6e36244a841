import type { FastifyRequest } from 'fastify';

type RouteOptions = FastifyRequest['routeOptions'];

declare module 'fastify' {
  interface FastifyRequest {
    /** `routeOptions`, once read (see routeOf); null until then. */
    routeOptionsOnce: RouteOptions | null;
  }
}

/**
 * A request's `routeOptions`, built once per request. Fastify 5 builds a new object of a dozen fields
 * at every read of `request.routeOptions`, and the hooks a proxied call passes read it about ten times
 * (auth, rate limit, x402, metrics, tracing, logging). A request of the edge (decorated with
 * `routeOptionsOnce`, see buildApp) keeps the first; anything else is answered as it is.
 */
export function routeOf(request: Pick<FastifyRequest, 'routeOptions'> & { routeOptionsOnce?: RouteOptions | null }): RouteOptions {
  const kept = request.routeOptionsOnce;
  if (kept) return kept;
  const options = request.routeOptions;
  if (kept === null) request.routeOptionsOnce = options;
  return options;
}
