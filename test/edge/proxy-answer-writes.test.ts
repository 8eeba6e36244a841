import { connect, type AddressInfo, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestAccount, createTestApp, type TestAccount } from '../helpers/app.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// A small proxied answer leaves the edge in one write: its header block, its body and its end together,
// not one system call each (a system call costs microseconds; the proxy's budget per call is tens of
// them). The edge's side of the connection counts the writes its stream hands to the system (`_write`
// for one chunk, `_writev` for several at once). A change to how the answer is written (the chunk path,
// the head, the end) that splits it fails here.

const BODY = JSON.stringify({ items: Array.from({ length: 20 }, (_, i) => ({ id: i, name: `item ${i}` })) });

describe('the metered answer on the wire', () => {
  let app: FastifyInstance;
  let upstream: TestUpstream;
  let account: TestAccount;
  let apiId: string;
  let port: number;
  /** Writes handed to the system by the edge's sockets, in order: the number of chunks of each. */
  const writes: number[] = [];

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(BODY)) });
      res.end(BODY);
    });
    app = await createTestApp({ ALLOW_PRIVATE_UPSTREAMS: 'true' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    // The stream's own hooks, wrapped: `_write` hands one chunk to the system, `_writev` several at once.
    type Writes = { _write: (...args: unknown[]) => void; _writev: (chunks: unknown[], ...rest: unknown[]) => void };
    app.server.on('connection', (socket: Socket) => {
      const hooks = socket as unknown as Writes;
      const write = hooks._write.bind(socket);
      const writev = hooks._writev.bind(socket);
      hooks._write = (...args) => (writes.push(1), write(...args));
      hooks._writev = (chunks, ...rest) => (writes.push(chunks.length), writev(chunks, ...rest));
    });
    port = (app.server.address() as AddressInfo).port;
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.001' });
    account = await createTestAccount(app.deps.sql, { balanceMicros: 1_000_000n });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
  });

  /** Sends one request on a kept-alive socket and gathers what arrives until the whole answer is in, piece by piece. */
  function exchange(socket: Socket, path: string): Promise<Buffer[]> {
    return new Promise((resolve, reject) => {
      const pieces: Buffer[] = [];
      const onData = (piece: Buffer) => {
        pieces.push(piece);
        const all = Buffer.concat(pieces).toString('latin1');
        const head = all.indexOf('\r\n\r\n');
        if (head === -1) return;
        const length = Number(/content-length: (\d+)/i.exec(all.slice(0, head))?.[1] ?? Number.NaN);
        if (all.length - head - 4 >= length) {
          socket.off('data', onData);
          socket.off('error', onError);
          resolve(pieces);
        }
      };
      const onError = (error: Error) => {
        socket.off('data', onData);
        reject(error);
      };
      socket.on('data', onData);
      socket.once('error', onError);
      socket.write(`GET /api/v1/proxy/${apiId}${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${account.fullKey}\r\n\r\n`);
    });
  }

  it('sends the header block and a small body in one write', async () => {
    const socket = connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.setNoDelay(true);
    try {
      const answers: Buffer[][] = [];
      const writesPerAnswer: number[][] = [];
      for (let i = 0; i < 20; i += 1) {
        writes.length = 0;
        answers.push(await exchange(socket, `/items/${i}`));
        writesPerAnswer.push([...writes]);
      }
      for (const pieces of answers) {
        const text = Buffer.concat(pieces).toString('utf8');
        expect(text.startsWith('HTTP/1.1 200')).toBe(true);
        expect(text.endsWith(BODY)).toBe(true);
      }
      // Each answer left in one write (of its header block, its body and the end's empty chunk).
      expect(writesPerAnswer.map((each) => each.length)).toEqual(answers.map(() => 1));
      expect(writesPerAnswer[0]![0]).toBeGreaterThanOrEqual(2);
    } finally {
      socket.destroy();
    }
  });
});
