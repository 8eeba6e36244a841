import type { Redis } from 'ioredis';
import { createRedis } from './redis.js';

/** The message a feed publishes to itself each heartbeat; row ids never start with "~". */
export const HEARTBEAT_MESSAGE = '~heartbeat';

export interface ChangeFeedHeartbeat {
  /** The connection heartbeats are published on (not the subscriber's: that one can only listen). */
  publisher: Redis;
  /** How often a heartbeat is published (default 1000 ms). */
  everyMs?: number;
  /** Silence after which cached rows are no longer trusted (default 2000 ms). */
  staleAfterMs?: number;
  /** Silence after which the subscriber connection is dropped and reopened (default 3 × staleAfterMs). */
  reconnectAfterMs?: number;
  /** Told when the feed goes silent and when it is heard again. */
  onStateChange?: (state: 'silent' | 'heard', silentForMs: number) => void;
}

/**
 * One Redis pub/sub channel on which any instance announces that a row changed (its id as the
 * message). In-process caches built on it trust their entries only while the feed is `live`, and
 * store a row they read only if `generation` did not move meanwhile: every announcement and every
 * loss of the subscription bumps it, so a change can never be missed or overwritten by a stale read.
 *
 * A subscription can look alive and hear nothing (a half-open TCP connection, a paused client, a
 * proxy that stopped forwarding). With `heartbeat`, each instance publishes a heartbeat on the
 * channel every second; a feed that hears nothing (no heartbeat, no change) for `staleAfterMs` is not
 * `live` until it hears something again, and after `reconnectAfterMs` it reopens its connection.
 */
export class ChangeFeed {
  private subscriber: Redis | null = null;
  private subscribed = false;
  private changes = 0;
  private lastHeardAt = 0;
  private silent = false;
  private lastReconnectAt = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly redisUrl: string,
    private readonly channel: string,
    private readonly handlers: { changed: (id: string) => void; lost: () => void },
    private readonly heartbeat?: ChangeFeedHeartbeat,
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
    return this.subscribed && !this.silent;
  }

  start(): void {
    // TCP keep-alive probes after 1 s idle: the kernel notices a peer that vanished.
    // It subscribes on every 'ready' itself, so ioredis's own resubscribe is off.
    const subscriber = createRedis(this.redisUrl, 'subscriber', { lazyConnect: true, keepAlive: 1_000, autoResubscribe: false });
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, message: string) => {
      this.heard();
      if (message === HEARTBEAT_MESSAGE) return;
      this.changes += 1;
      this.handlers.changed(message);
    });
    subscriber.on('ready', () => {
      subscriber.subscribe(this.channel).then(
        () => {
          this.lastHeardAt = Date.now();
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
    this.lastHeardAt = Date.now();
    if (this.heartbeat) {
      this.timer = setInterval(() => this.beat(), this.heartbeat.everyMs ?? 1_000);
      this.timer.unref();
    }
  }

  stop(): void {
    this.subscribed = false;
    if (this.timer) clearInterval(this.timer);
    if (this.subscriber) {
      this.subscriber.removeAllListeners('close');
      this.subscriber.disconnect();
    }
  }

  private heard(): void {
    const silentFor = Date.now() - this.lastHeardAt;
    this.lastHeardAt = Date.now();
    if (this.silent) {
      this.silent = false;
      this.heartbeat?.onStateChange?.('heard', silentFor);
    }
  }

  private beat(): void {
    const heartbeat = this.heartbeat!;
    heartbeat.publisher.publish(this.channel, HEARTBEAT_MESSAGE).catch(() => {
      // Redis refusing the heartbeat shows up below as silence on every instance.
    });
    const now = Date.now();
    const silentFor = now - this.lastHeardAt;
    const staleAfter = heartbeat.staleAfterMs ?? 2_000;
    if (this.subscribed && !this.silent && silentFor > staleAfter) {
      this.silent = true;
      this.changes += 1;
      this.handlers.lost();
      heartbeat.onStateChange?.('silent', silentFor);
    }
    const reconnectAfter = heartbeat.reconnectAfterMs ?? 3 * staleAfter;
    // A connection that is up but hears nothing (not even the answer to SUBSCRIBE) may be
    // half-open: drop it; ioredis reconnects and 'ready' subscribes again. A connection that is
    // down is ioredis's to retry.
    if (this.subscriber?.status === 'ready' && silentFor > reconnectAfter && now - this.lastReconnectAt > reconnectAfter) {
      this.lastReconnectAt = now;
      this.subscriber?.disconnect(true);
    }
  }
}
