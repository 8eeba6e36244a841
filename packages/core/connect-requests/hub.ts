import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { expireDueConnectRequests, findConnectRequestsByIds, getConnectRequestApis, type ConnectRequestRow } from '#db/connect-requests';
import type { Sql } from '#db/sql';
import { addEmail, type WebhookEventType } from '#core/notifications';
import { ChangeFeed, withTimeout, type Logger } from '#core/platform';
import { presentConnectRequest, type ConnectRequestNotices, type ConnectRequestView } from './requests.js';

/** Pub/sub channel on which any instance announces that a connect request ended (its id as the message). */
export const connectRequestChangesChannel = (prefix: string) => `${prefix}:connect-request-changes`;

interface Waiter {
  accountId: string;
  deliver(row: ConnectRequestRow): void;
  closed(): void;
}

/** What a waiter is told: the request ended (once), or the hub is stopping (the edge shuts down). */
export interface ConnectRequestSink {
  ended(row: ConnectRequestRow): void;
  closed(): void;
}

/** How long telling (a queue, the webhook emitter) may take before the request goes on without it. */
const NOTICE_TIMEOUT_MS = 3_000;

export interface ConnectRequestHubOptions {
  sql: Sql;
  /** The request-path connection: publishes the "ended" announcements. */
  redis: Redis;
  redisUrl: string;
  prefix: string;
  publicUrl: string;
  /** The account's webhooks (the edge's WebhookEmitter). */
  webhooks: { emit(accountId: string, type: WebhookEventType, data: Record<string, unknown>, id?: string): Promise<number> };
  /** The e-mail queue (notifications' emailJob). */
  emails: Queue;
  log: Logger;
  /** How often waiters re-read their requests whatever they heard (covers a lost announcement, and expiry). */
  recheckMs: number;
}

/**
 * Connect requests' news on one edge: tells the account of a new request (webhook
 * `connection.requested`, the owner's e-mail) and of an ended one (webhook
 * `connection.request_resolved`, and an announcement on Redis so every edge's waiters answer at
 * once), and holds this edge's waiters (event streams and long polls) with one subscriber
 * connection. A waiter is answered once, when its request is no longer pending.
 */
export class ConnectRequestHub implements ConnectRequestNotices {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly feed: ChangeFeed;
  private timer: NodeJS.Timeout | null = null;
  private started = false;

  constructor(private readonly options: ConnectRequestHubOptions) {
    this.feed = new ChangeFeed(options.redisUrl, connectRequestChangesChannel(options.prefix), {
      changed: (id) => {
        if (this.waiters.has(id)) void this.check([id]);
      },
      // The subscription dropped: anything may have been missed meanwhile.
      lost: () => void this.check([...this.waiters.keys()]),
    });
  }

  /** Waiters open on this edge. */
  get size(): number {
    let count = 0;
    for (const set of this.waiters.values()) count += set.size;
    return count;
  }

  private ensureStarted(): void {
    if (this.started) return;
    this.started = true;
    this.feed.start();
    this.timer = setInterval(() => void this.check([...this.waiters.keys()]), this.options.recheckMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.started) this.feed.stop();
    this.started = false;
    const waiters = [...this.waiters.values()].flatMap((set) => [...set]);
    this.waiters.clear();
    for (const waiter of waiters) waiter.closed();
  }

  /**
   * Tells `sink.ended` once, with the request's row, when it is no longer pending (at once if it
   * already is not). Returns the function that stops waiting.
   */
  follow(accountId: string, id: string, sink: ConnectRequestSink): () => void {
    this.ensureStarted();
    let done = false;
    const waiter: Waiter = {
      accountId,
      deliver: (row) => {
        if (done) return;
        done = true;
        stop();
        sink.ended(row);
      },
      closed: () => {
        if (done) return;
        done = true;
        sink.closed();
      },
    };
    const stop = () => {
      const set = this.waiters.get(id);
      set?.delete(waiter);
      if (set && set.size === 0) this.waiters.delete(id);
    };
    let set = this.waiters.get(id);
    if (!set) {
      set = new Set();
      this.waiters.set(id, set);
    }
    set.add(waiter);
    // Registered before this first read, so an ending announced meanwhile is not missed.
    void this.check([id]);
    return () => {
      done = true;
      stop();
    };
  }

  /** Re-reads these requests and answers the waiters of those that ended (expiring overdue ones first). */
  private async check(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      let rows = await findConnectRequestsByIds(this.options.sql, ids);
      const overdue = new Set(rows.filter((row) => row.status === 'pending' && row.expires_at.getTime() <= Date.now()).map((row) => row.account_id));
      for (const accountId of overdue) {
        const expired = await expireDueConnectRequests(this.options.sql, accountId);
        if (expired.length > 0) await this.ended(expired);
      }
      if (overdue.size > 0) rows = await findConnectRequestsByIds(this.options.sql, ids);
      for (const row of rows) {
        if (row.status === 'pending') continue;
        for (const waiter of [...(this.waiters.get(row.id) ?? [])]) if (waiter.accountId === row.account_id) waiter.deliver(row);
      }
    } catch (error) {
      this.options.log.warn(
        { err: { message: (error as Error).message } },
        'connect request waiters could not re-read their requests; retried on the next tick',
      );
    }
  }

  async requested(view: ConnectRequestView, accountId: string): Promise<void> {
    const { apiId, apiName, authKind, oauthProvider, purpose, scopes, expiresAt, connectUrl } = view;
    await this.tell('webhook connection.requested', () =>
      this.options.webhooks.emit(
        accountId,
        'connection.requested',
        { requestId: view.id, apiId, apiName, authKind, oauthProvider, purpose, scopes, expiresAt, connectUrl },
        `msg_connreq_${view.id.replaceAll('-', '')}`,
      ),
    );
    await this.tell('e-mail of the connect request', () => addEmail(this.options.emails, { kind: 'connect-request', requestId: view.id }));
  }

  async ended(rows: ConnectRequestRow[]): Promise<void> {
    if (rows.length === 0) return;
    const channel = connectRequestChangesChannel(this.options.prefix);
    await this.tell('announcement to the other edges', async () => {
      const pipeline = this.options.redis.pipeline();
      for (const row of rows) pipeline.publish(channel, row.id);
      await pipeline.exec();
    });
    // This edge's waiters need not wait for the round trip.
    for (const row of rows) for (const waiter of [...(this.waiters.get(row.id) ?? [])]) if (waiter.accountId === row.account_id) waiter.deliver(row);
    const apis = new Map((await getConnectRequestApis(this.options.sql, [...new Set(rows.map((row) => row.api_id))])).map((api) => [api.id, api]));
    for (const row of rows) {
      const view = presentConnectRequest(row, apis.get(row.api_id) ?? null, this.options.publicUrl);
      await this.tell('webhook connection.request_resolved', () =>
        this.options.webhooks.emit(
          row.account_id,
          'connection.request_resolved',
          {
            requestId: row.id,
            apiId: row.api_id,
            apiName: view.apiName,
            status: row.status,
            oauthConnectionId: row.oauth_connection_id,
            resolvedAt: view.resolvedAt,
          },
          `msg_connres_${row.id.replaceAll('-', '')}`,
        ),
      );
    }
  }

  /** Best effort: the request stands when telling fails (the webhook sweeper re-queues recorded deliveries). */
  private async tell(what: string, action: () => Promise<unknown>): Promise<void> {
    try {
      await withTimeout(action(), NOTICE_TIMEOUT_MS, what);
    } catch (error) {
      this.options.log.warn({ err: { message: (error as Error).message } }, `connect request: ${what} failed`);
    }
  }
}
