import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { declareErrorResponses } from '../routes/error-responses.js';

/**
 * The OpenAPI document is generated from the routes' zod schemas (never written by hand), served at
 * /api/v1/openapi.json, with a human-readable reference at /api/v1/reference. A route's
 * `config.auth` decides the security requirement the document shows.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's 200 is JSON or, when asked for, CSV: the OpenAPI document lists both media types. */
    csvAnswer?: boolean;
  }
}

export default fp(
  async function openapiPlugin(app: FastifyInstance) {
    // Before any route is added: every route's OpenAPI entry gets the error responses it can give.
    app.addHook('onRoute', declareErrorResponses);
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Agent API platform',
          version: '1.0.0',
          description:
            'A directory and metered gateway for third-party APIs, with cookbook sessions for long procedures. ' +
            'Every success body has `ok: true`; every error is `{ ok: false, error, code, hint? }`. Money is in dollars.',
        },
        servers: [{ url: app.deps.settings.PUBLIC_URL }],
        components: {
          securitySchemes: {
            bearerAuth: { type: 'http', scheme: 'bearer', description: 'service_sk_ followed by 48 hex digits' },
            apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
            sessionCookie: { type: 'apiKey', in: 'cookie', name: 'session', description: 'Dashboard session (browser use only)' },
          },
        },
      },
      transform: (input) => {
        const out = jsonSchemaTransform(input);
        const auth = (input.route.config as { auth?: string } | undefined)?.auth ?? 'none';
        if (auth !== 'none') {
          const keys = [{ bearerAuth: [] }, { apiKeyHeader: [] }];
          const any = auth === 'apiKey' ? keys : [...keys, { sessionCookie: [] }];
          // An empty requirement first: credentials are optional there (the answer is the caller's when given).
          (out.schema as Record<string, unknown>).security = auth === 'optional' ? [{}, ...any] : any;
        }
        // A route that also answers CSV (GET /statement) documents both media types of its 200.
        const response = (out.schema as { response?: Record<string, unknown> }).response;
        if ((input.route.config as { csvAnswer?: boolean } | undefined)?.csvAnswer && response?.['200']) {
          const json = response['200'] as { description?: string };
          response['200'] = {
            description: json.description ?? 'Default Response',
            content: {
              'application/json': { schema: json },
              'text/csv': { schema: { type: 'string', description: 'The whole period as CSV, one line per entry after a header line' } },
            },
          };
        }
        return out;
      },
      transformObject: jsonSchemaTransformObject,
    });
    await app.register(swaggerUi, { routePrefix: '/api/v1/reference', staticCSP: true });
    app.get('/api/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  },
  { name: 'openapi', dependencies: ['deps'] },
);
