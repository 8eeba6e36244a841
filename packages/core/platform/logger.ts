/**
 * What the domain needs of a logger: pino's call shape (an object of fields, then a message), which
 * Fastify's loggers and a bare pino logger both satisfy. Core names this, never Fastify's types, so
 * it runs the same under the edge, a worker or a test (a dependency-cruiser rule keeps Fastify out).
 */
export interface Logger {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}
