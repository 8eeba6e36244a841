import type { Redis } from 'ioredis';
import { createRedis } from './redis.js';

/**
 * One Redis pub/sub channel on which any instance announces that a row changed (its id as the
 * message). In-process caches built on it trust their entries only while the feed is `live`, and
 * store a row they read only if `generation` did not move meanwhile: every announcement and every
 * loss of the subscription bumps it, so a change can never be missed or overwritten by a stale read.
 */
export class ChangeFeed {
  private subscriber: Redis | null = null;
  private subscribed = false;
  private changes = 0;

  constructor(
    private readonly redisUrl: string,
    private readonly channel: string,
    private readonly handlers: { changed: (id: string) => void; lost: () => void },
  ) {}

  /** Moves on every announcement, every loss of the subscription and every local `invalidate()`. */
  get generation(): number {
    return this.changes;
  }

  /** For a change made by this instance itself, before it is announced. */
  invalidate(): void {
    this.changes += 1;
  }

  /** True while announcements are being received, i.e. while cached rows may be used. */
  get live(): boolean {
    return this.subscribed;
  }

  start(): void {
    const subscriber = createRedis(this.redisUrl, 'subscriber', { lazyConnect: true });
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, id: string) => {
      this.changes += 1;
      this.handlers.changed(id);
    });
    subscriber.on('ready', () => {
      subscriber.subscribe(this.channel).then(
        () => {
          this.subscribed = true;
        },
        () => {
          this.subscribed = false;
        },
      );
    });
    const lost = () => {
      this.subscribed = false;
      this.changes += 1;
      this.handlers.lost();
    };
    subscriber.on('close', lost);
    subscriber.on('end', lost);
    subscriber.connect().catch(() => {});
  }

  stop(): void {
    this.subscribed = false;
    if (this.subscriber) {
      this.subscriber.removeAllListeners('close');
      this.subscriber.disconnect();
    }
  }
}
