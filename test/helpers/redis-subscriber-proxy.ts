import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

interface Link {
  client: Socket;
  upstream: Socket;
  subscriber: boolean;
}

/**
 * A TCP proxy in front of Redis that the test controls. It can stop forwarding on the connections
 * that subscribed to pub/sub (it sees SUBSCRIBE go by) while keeping them open: to the client the
 * connection looks alive and hears nothing, as with a half-open connection or a stuck middlebox.
 */
export class RedisSubscriberProxy {
  private server: Server | null = null;
  private readonly links = new Set<Link>();
  private frozen = false;
  /** Subscriber connections opened since the proxy started (a reconnect adds one). */
  subscriberConnections = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<string> {
    this.server = createServer((client) => {
      const upstream = createConnection(this.target);
      const link: Link = { client, upstream, subscriber: false };
      this.links.add(link);
      client.on('data', (chunk) => {
        if (!link.subscriber && /SUBSCRIBE/i.test(chunk.toString('latin1'))) {
          link.subscriber = true;
          this.subscriberConnections += 1;
        }
        if (!(this.frozen && link.subscriber)) upstream.write(chunk);
      });
      upstream.on('data', (chunk) => {
        // Frozen: what Redis sends is dropped, as a dead path would lose it.
        if (!(this.frozen && link.subscriber)) client.write(chunk);
      });
      const close = () => {
        this.links.delete(link);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', close);
      upstream.on('close', close);
      client.on('error', close);
      upstream.on('error', close);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Stops forwarding both ways on subscriber connections, present and future, without closing them. */
  freezeSubscribers(): void {
    this.frozen = true;
  }

  thaw(): void {
    this.frozen = false;
  }

  async stop(): Promise<void> {
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
