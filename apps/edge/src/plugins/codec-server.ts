import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { codecServerBody, EncryptionCodec, fromCodecJson, PlatformError, toCodecJson } from '#core/platform';
import { requireOperator } from '../http/operator-auth.js';

export const CODEC_SERVER_PATH = '/codec';
/** Histories hold many payloads; one UI page of them stays well under this. */
const CODEC_BODY_LIMIT = 16 * 1024 * 1024;
const ALLOWED_HEADERS = 'authorization, content-type, x-namespace';

/**
 * Temporal's codec server protocol on the edge, for operators: the Temporal UI (its "remote codec
 * endpoint" setting) and the CLI (`--codec-endpoint`) POST proto3-JSON payloads to
 * `/codec/decode` and `/codec/encode` and get them back decrypted or encrypted with the platform's
 * payload codec (TEMPORAL_CODEC_KEYS). Behind OPERATOR_BASIC_AUTH like the queue board; without
 * that setting nothing is mounted. The UI is another origin, so the routes answer CORS for the
 * origin of TEMPORAL_UI_URL only, with credentials (the browser resends the Basic login).
 */
export default fp(
  async function codecServerPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const credentials = settings.OPERATOR_BASIC_AUTH;
    if (!credentials) return;
    const codec = new EncryptionCodec(settings.TEMPORAL_CODEC_KEYS);
    const uiOrigin = new URL(settings.TEMPORAL_UI_URL).origin;

    const allowOrigin = (request: FastifyRequest, reply: FastifyReply) => {
      reply.header('Vary', 'Origin');
      if (request.headers.origin !== uiOrigin) return;
      reply.header('Access-Control-Allow-Origin', uiOrigin);
      reply.header('Access-Control-Allow-Credentials', 'true');
    };

    // Preflight: browsers send it without credentials, so it is answered before the login check.
    app.options(`${CODEC_SERVER_PATH}/:operation`, { schema: { hide: true } }, async (request, reply) => {
      allowOrigin(request, reply);
      if (request.headers.origin === uiOrigin) {
        reply.header('Access-Control-Allow-Methods', 'POST, OPTIONS');
        reply.header('Access-Control-Allow-Headers', ALLOWED_HEADERS);
        reply.header('Access-Control-Max-Age', '600');
      }
      return reply.code(204).send();
    });

    const handler = (operation: 'encode' | 'decode') => async (request: FastifyRequest, reply: FastifyReply) => {
      allowOrigin(request, reply);
      await requireOperator(request, reply, {
        expected: credentials,
        realm: 'temporal codec',
        surface: 'The codec server',
        rateLimiter: app.rateLimiter,
      });
      const namespace = request.headers['x-namespace'];
      if (typeof namespace === 'string' && namespace !== '' && namespace !== settings.TEMPORAL_NAMESPACE) {
        throw new PlatformError('not_found', `This codec server serves namespace "${settings.TEMPORAL_NAMESPACE}", not "${namespace}"`, {
          hint: 'Point the Temporal UI of that namespace at its own codec endpoint.',
        });
      }
      const parsed = codecServerBody.safeParse(request.body);
      if (!parsed.success) {
        throw new PlatformError('validation_failed', 'Body must be {"payloads": [{"metadata": {...}, "data": "<base64>"}]}', {
          hint: "This is Temporal's codec server protocol: Payloads as proto3 JSON, bytes in base64.",
        });
      }
      const payloads = fromCodecJson(parsed.data);
      if (operation === 'encode') return reply.send(toCodecJson(await codec.encode(payloads)));
      // One payload the keys cannot open (an unknown key id, a tampered tag) is returned as it came,
      // so the operator still sees the rest of the history; the log says which key was missing.
      const decoded = await Promise.all(
        payloads.map(async (payload) => {
          try {
            return (await codec.decode([payload]))[0]!;
          } catch (error) {
            request.log.warn({ err: { message: (error as Error).message } }, 'codec server could not decrypt a payload');
            return payload;
          }
        }),
      );
      return reply.send(toCodecJson(decoded));
    };

    // An operator opens /codec once in the browser: it asks for the Basic login, which the browser
    // then resends with the UI's cross-origin requests to /codec/decode.
    app.get(CODEC_SERVER_PATH, { schema: { hide: true } }, async (request, reply) => {
      await requireOperator(request, reply, {
        expected: credentials,
        realm: 'temporal codec',
        surface: 'The codec server',
        rateLimiter: app.rateLimiter,
      });
      return reply
        .type('text/plain; charset=utf-8')
        .send(
          `Codec server for Temporal namespace "${settings.TEMPORAL_NAMESPACE}". You are logged in: the Temporal UI at ${uiOrigin} can now decode payloads through ${settings.PUBLIC_URL}${CODEC_SERVER_PATH} (with "include cross-origin credentials" on).\n`,
        );
    });

    const routeOptions = { schema: { hide: true }, bodyLimit: CODEC_BODY_LIMIT };
    app.post(`${CODEC_SERVER_PATH}/encode`, routeOptions, handler('encode'));
    app.post(`${CODEC_SERVER_PATH}/decode`, routeOptions, handler('decode'));
  },
  { name: 'codec-server', dependencies: ['deps', 'rate-limit'] },
);
