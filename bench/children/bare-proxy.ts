// The bare baseline of the proxy scenario: Fastify forwarding every request to the upstream with an
// undici Pool (keep-alive), streaming the answer back; no auth, rate limit, charge, usage or logging.
// Arguments: the port to listen on and the upstream origin.
import Fastify from 'fastify';
import type { Readable } from 'node:stream';
import { Pool, type Dispatcher } from 'undici';

const [port, origin] = [Number(process.argv[2]), process.argv[3] ?? ''];
const pool = new Pool(origin, { connections: 256, keepAliveTimeout: 10_000 });
const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host']);
app.all('/*', async (request, reply) => {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) if (!HOP.has(name) && typeof value === 'string') headers[name] = value;
  const upstream = await pool.request({
    method: request.method as Dispatcher.HttpMethod,
    path: request.raw.url ?? '/',
    headers,
    body: (request.body as Readable | undefined) ?? null,
  });
  reply.code(upstream.statusCode);
  for (const [name, value] of Object.entries(upstream.headers)) if (!HOP.has(name) && value !== undefined) reply.header(name, value);
  return reply.send(upstream.body);
});
await app.listen({ host: '127.0.0.1', port });
process.on(
  'SIGTERM',
  () =>
    void app
      .close()
      .then(() => pool.close())
      .then(() => process.exit(0)),
);
