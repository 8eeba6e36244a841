import type { Redis } from 'ioredis';
import { createRedis } from './redis.js';

/** The message a feed publishes to itself each heartbeat; row ids never start with "~". */
export const HEARTBEAT_MESSAGE = '~heartbeat';

export interface ChangeFeedHeartbeat {
  /** The connection heartbeats are published on (not the subscriber's: that one can only listen). */
  publisher: Redis;
  /** How often a heartbeat is published (default 100 ms). */
  everyMs?: number;
  /** Silence after which cached rows are no longer trusted (default 700 ms). */
  staleAfterMs?: number;
  /** Silence after which the subscriber connection is dropped and reopened (default 3000 ms). */
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
 * channel every `everyMs`; a feed that has heard nothing (no heartbeat, no change) for
 * `staleAfterMs` is not `live`, decided on the clock at each read, until it hears something again,
 * and after `reconnectAfterMs` it reopens its connection. A change made while the feed is silent
 * therefore reaches this instance's readers within `staleAfterMs`, the design's "within a second"
 * included, however late the heartbeat timer runs.
 */
export class ChangeFeed {
  private subscriber: Redis | null = null;
  private subscribed = false;
  private changes = 0;
  private lastHeardAt = 0;
  /** The silence was reported (onStateChange 'silent') and nothing has been heard since. */
  private reportedSilent = false;
  private lastReconnectAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly staleAfterMs: number;
  private readonly reconnectAfterMs: number;

  constructor(
    private readonly redisUrl: string,
    private readonly channel: string,
    private readonly handlers: { changed: (id: string) => void; lost: () => void },
    private readonly heartbeat?: ChangeFeedHeartbeat,
  ) {
    this.staleAfterMs = heartbeat?.staleAfterMs ?? 700;
    this.reconnectAfterMs = heartbeat?.reconnectAfterMs ?? 3_000;
  }

  /** Moves on every announcement, every loss of the subscription and every local `invalidate()`. */
  get generation(): number {
    return this.changes;
  }

  /** For a change made by this instance itself, before it is announced. */
  invalidate(): void {
    this.changes += 1;
  }

  /**
   * True while announcements are being received, i.e. while cached rows may be used. With
   * heartbeats, the silence is measured here rather than by the heartbeat timer: a cache consulted
   * between two beats (or while a beat runs late under load) already distrusts a silent feed.
   */
  get live(): boolean {
    if (!this.subscribed) return false;
    return !this.heartbeat || Date.now() - this.lastHeardAt <= this.staleAfterMs;
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
      this.timer = setInterval(() => this.beat(), this.heartbeat.everyMs ?? 100);
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
    const now = Date.now();
    const silentFor = now - this.lastHeardAt;
    this.lastHeardAt = now;
    if (this.heartbeat && silentFor > this.staleAfterMs) {
      // The feed was silent, whether or not a beat noticed: an announcement may have been lost
      // meanwhile, so what was cached before is dropped and a read begun before stores nothing.
      this.changes += 1;
      this.handlers.lost();
    }
    if (this.reportedSilent) {
      this.reportedSilent = false;
      this.heartbeat?.onStateChange?.('heard', silentFor);
    }
  }

  private beat(): void {
    const heartbeat = this.heartbeat!;
    heartbeat.publisher.publish(this.channel, HEARTBEAT_MESSAGE).catch(() => {
      // Redis refusing the heartbeat shows up below as silence on every instance.
    });
    // Judged after the I/O waiting now is read: a beat that runs late because the event loop was
    // busy must not take messages that arrived meanwhile, unread, for silence.
    setImmediate(() => this.judge());
  }

  /** Reports a silence (and frees the cache at once), and reopens a connection silent for too long. */
  private judge(): void {
    const now = Date.now();
    const silentFor = now - this.lastHeardAt;
    if (this.subscribed && !this.reportedSilent && silentFor > this.staleAfterMs) {
      this.reportedSilent = true;
      this.changes += 1;
      this.handlers.lost();
      this.heartbeat?.onStateChange?.('silent', silentFor);
    }
    // A connection that is up but hears nothing (not even the answer to SUBSCRIBE) may be
    // half-open: drop it; ioredis reconnects and 'ready' subscribes again. A connection that is
    // down is ioredis's to retry.
    if (this.subscriber?.status === 'ready' && silentFor > this.reconnectAfterMs && now - this.lastReconnectAt > this.reconnectAfterMs) {
      this.lastReconnectAt = now;
      this.subscriber?.disconnect(true);
    }
  }
}
