import type { Redis } from 'ioredis';
import { sessionEventsChannel, sessionEventsKey } from './event-stream.js';
import { createRedis } from '#core/platform';
import { FINAL_EVENTS, type SessionEventName } from '#workflows/messages';

export interface StreamedEvent {
  /** The Redis stream id, sent as the SSE `id:` and accepted back as `Last-Event-ID`. */
  id: string;
  name: SessionEventName;
  data: string;
}

export interface FollowerSink {
  event(event: StreamedEvent): void;
  heartbeat(): void;
  /** The final event was delivered (or the stream is over): end the response. */
  end(): void;
}

interface Follower {
  sessionId: string;
  lastId: string;
  sink: FollowerSink;
  pulling: boolean;
  dirty: boolean;
  closed: boolean;
}

export const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

/** Orders two stream ids (`ms-seq`). */
export function compareStreamIds(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

function parseEntries(entries: [string, string[]][]): StreamedEvent[] {
  return entries.map(([id, fields]) => {
    const record: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!;
    return { id, name: (record.event ?? 'message') as SessionEventName, data: record.data ?? '{}' };
  });
}

/**
 * Fans session events out to every SSE client of this edge instance with two Redis connections in
 * all, however many streams are open: one subscriber on the "stream grew" channel the activities
 * publish to, and the shared command connection for XRANGE reads (one read per session and position,
 * however many clients follow it). A client that goes away is
 * dropped from the maps at once. A heartbeat tick (one timer for all clients) also re-reads every
 * followed stream, which covers a notification lost while the subscriber reconnected.
 */
export class SessionEventHub {
  private readonly followers = new Map<string, Set<Follower>>();
  private subscriber: Redis | null = null;
  private subscribed: Promise<unknown> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly options: { redisUrl: string; prefix: string; reader: Redis; heartbeatMs: number; batchSize?: number }) {}

  /** Open streams and sessions followed on this instance. */
  stats(): { sessions: number; followers: number; subscriberConnections: number } {
    let followers = 0;
    for (const set of this.followers.values()) followers += set.size;
    return { sessions: this.followers.size, followers, subscriberConnections: this.subscriber ? 1 : 0 };
  }

  private async ensureSubscribed(): Promise<void> {
    if (!this.subscriber) {
      const channel = sessionEventsChannel(this.options.prefix);
      const subscriber = createRedis(this.options.redisUrl, 'subscriber', { connectionName: `${this.options.prefix}:sse-hub` });
      subscriber.on('message', (_channel: string, sessionId: string) => {
        const set = this.followers.get(sessionId);
        if (set) this.pullFollowers(set);
      });
      // After a reconnect ioredis subscribes again; read everything in case a message was missed.
      subscriber.on('ready', () => this.pullAll());
      this.subscriber = subscriber;
      this.subscribed = subscriber.subscribe(channel);
      this.timer = setInterval(() => this.tick(), this.options.heartbeatMs);
      this.timer.unref();
    }
    await this.subscribed;
  }

  /**
   * Follows a session's stream after `fromId` ('0-0' for everything): replays what is stored, then
   * delivers new events as they are appended, until the final event. Returns the unsubscribe function.
   */
  async follow(sessionId: string, fromId: string, sink: FollowerSink, options: { sessionEnded: boolean }): Promise<() => void> {
    if (this.stopped) throw new Error('event hub stopped');
    // Nothing more will come when the caller already has the final event, or when an ended
    // session's stream has expired.
    const key = sessionEventsKey(this.options.prefix, sessionId);
    const [top] = parseEntries((await this.options.reader.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][]);
    if (top ? FINAL_EVENTS.includes(top.name) && compareStreamIds(top.id, fromId) <= 0 : options.sessionEnded) {
      sink.end();
      return () => {};
    }
    await this.ensureSubscribed();
    const follower: Follower = { sessionId, lastId: fromId, sink, pulling: false, dirty: false, closed: false };
    let set = this.followers.get(sessionId);
    if (!set) {
      set = new Set();
      this.followers.set(sessionId, set);
    }
    set.add(follower);
    // Subscribed before the first read, so nothing appended meanwhile can be missed.
    this.pullFollowers([follower]);
    return () => this.drop(follower);
  }

  private drop(follower: Follower): void {
    follower.closed = true;
    const set = this.followers.get(follower.sessionId);
    if (!set) return;
    set.delete(follower);
    if (set.size === 0) this.followers.delete(follower.sessionId);
  }

  /** Reads for these followers, one XRANGE per group of followers at the same position. */
  private pullFollowers(followers: Iterable<Follower>): void {
    const groups = new Map<string, Follower[]>();
    for (const follower of followers) {
      const group = groups.get(follower.lastId);
      if (group) group.push(follower);
      else groups.set(follower.lastId, [follower]);
    }
    for (const group of groups.values()) void this.pullGroup(group);
  }

  private async pullGroup(candidates: Follower[]): Promise<void> {
    // A follower already reading is marked to read again when it is done.
    const group = candidates.filter((follower) => {
      if (follower.pulling) follower.dirty = true;
      return !follower.pulling && !follower.closed;
    });
    const first = group[0];
    if (!first) return;
    for (const follower of group) {
      follower.pulling = true;
      follower.dirty = false;
    }
    const batchSize = this.options.batchSize ?? 500;
    let more = false;
    try {
      const key = sessionEventsKey(this.options.prefix, first.sessionId);
      const entries = (await this.options.reader.xrange(key, `(${first.lastId}`, '+', 'COUNT', batchSize)) as [string, string[]][];
      const events = parseEntries(entries);
      for (const follower of group) this.deliver(follower, events);
      more = entries.length === batchSize;
    } catch {
      // Redis hiccup: the next notification or heartbeat tick reads again from lastId.
    } finally {
      for (const follower of group) follower.pulling = false;
    }
    const again = group.filter((follower) => !follower.closed && (follower.dirty || more));
    if (again.length > 0) this.pullFollowers(again);
  }

  private deliver(follower: Follower, events: StreamedEvent[]): void {
    for (const event of events) {
      if (follower.closed) return;
      follower.lastId = event.id;
      follower.sink.event(event);
      if (FINAL_EVENTS.includes(event.name)) {
        this.drop(follower);
        follower.sink.end();
        return;
      }
    }
  }

  private pullAll(): void {
    for (const set of this.followers.values()) this.pullFollowers(set);
  }

  private tick(): void {
    for (const set of this.followers.values()) for (const follower of set) follower.sink.heartbeat();
    this.pullAll();
  }

  /** Ends every open stream and closes the subscriber connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const set of this.followers.values()) {
      for (const follower of set) {
        follower.closed = true;
        follower.sink.end();
      }
    }
    this.followers.clear();
    if (this.subscriber) await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
  }
}

/** A page of a session's events after `afterId`, for clients that poll instead of holding a stream. */
export interface EventPage {
  events: StreamedEvent[];
  /** The id to pass as `afterId` next time (unchanged when nothing new arrived). */
  lastEventId: string;
  /** The final event is in this page or was delivered before: nothing more will come. */
  ended: boolean;
}

/**
 * Reads up to `limit` events after `afterId` ('0-0' for the start) from the session's stream: the
 * same stream, ids and event names the SSE route sends.
 */
export async function readSessionEvents(
  reader: Redis,
  prefix: string,
  sessionId: string,
  afterId: string,
  limit: number,
  sessionEnded: boolean,
): Promise<EventPage> {
  const key = sessionEventsKey(prefix, sessionId);
  const events = parseEntries((await reader.xrange(key, `(${afterId}`, '+', 'COUNT', limit)) as [string, string[]][]);
  const last = events.at(-1);
  let ended: boolean;
  if (last && FINAL_EVENTS.includes(last.name)) ended = true;
  else if (events.length === limit) ended = false;
  else {
    // Nothing more in the stream now: over when the final event was already delivered, or when an
    // ended session's stream has expired.
    const [top] = parseEntries((await reader.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][]);
    ended = top ? FINAL_EVENTS.includes(top.name) : sessionEnded;
  }
  return { events, lastEventId: last?.id ?? afterId, ended };
}
