import { createServer, Socket, type AddressInfo } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Drops every open connection and refuses new ones at once (as a failed database host would). */
  cut(): void;
  restore(): void;
  /** Holds back what the service sends until `release` (as a client sees a service, or its own event loop, that stalls). */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

/** A TCP forwarder on 127.0.0.1 in front of a real service, that a test can cut and restore, or hold its answers back. */
export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let refusing = false;
  let holding = false;
  const held: Array<() => void> = [];
  const server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = new Socket();
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    upstream.connect(targetPort, targetHost, () => {
      client.pipe(upstream);
      // Not piped, so that answers can be held back (hold); backpressure and the end are passed on by hand.
      const send = (chunk: Buffer) => {
        if (!client.write(chunk)) upstream.pause();
      };
      client.on('drain', () => upstream.resume());
      upstream.on('data', (chunk: Buffer) => (holding ? held.push(() => send(chunk)) : send(chunk)));
      upstream.on('end', () => (holding ? held.push(() => client.end()) : client.end()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      refusing = true;
      for (const socket of open) socket.destroy();
      open.clear();
    },
    restore() {
      refusing = false;
    },
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      for (const send of held.splice(0)) send();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
