import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PlatformError } from '#core/platform';
import { unusableKeys } from '#db/keys';
import { removedMembers } from '#db/members';

declare module 'fastify' {
  interface FastifyInstance {
    /** Admission and tracking of the long-lived event streams this edge serves. */
    eventStreams: EventStreams;
  }
}

export interface StreamCloseReason {
  /** key_revoked: the key that opened the stream stopped working; invalid_session: the approver was removed. */
  code: 'key_revoked' | 'invalid_session';
  error: string;
}

export interface OpenStream {
  /** Stops counting the stream (idempotent); call when it ends for any reason. */
  release(): void;
}

export interface EventStreams {
  /**
   * Counts a new stream against its account's cap across every edge, or throws 429. `close` is
   * called if the key that opened it stops working (disabled, revoked, expired).
   */
  open(accountId: string, keyId: string | null, close: (reason: StreamCloseReason) => void, memberId?: string | null): Promise<OpenStream>;
  /** Streams open on this edge. */
  readonly size: number;
}

// KEYS[1] the account's set of stream leases; ARGV: now, lease expiry, cap, stream id, key ttl (ms).
const ADMIT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;

interface Tracked {
  accountId: string;
  keyId: string | null;
  /** An approver's dashboard session: closed when the approver is removed. */
  memberId: string | null;
  close: (reason: StreamCloseReason) => void;
  counted: 'cluster' | 'local';
}

/**
 * Open SSE streams: a cap per account counted in Redis across all edges (a sorted set of stream
 * leases per account, renewed while the stream lives, so a crashed edge's streams age out), and
 * streams closed when the key that opened them stops working: at once when the key change feed
 * announces the key, and by a periodic re-check in case an announcement was missed. When Redis
 * cannot be asked, admission falls back to this edge's own count against the same cap.
 */
export default fp(
  async function eventStreamsPlugin(app: FastifyInstance) {
    const { settings, redis, sql } = app.deps;
    const leaseMs = settings.SSE_STREAM_LEASE_SECONDS * 1000;
    const setKey = (accountId: string) => `${settings.REDIS_PREFIX}:sse-streams:${accountId}`;
    const streams = new Map<string, Tracked>();
    const localCount = new Map<string, number>();
    let redisWarned = false;

    const refused = () =>
      new PlatformError('rate_limited', `Too many open event streams: at most ${settings.SSE_MAX_STREAMS_PER_ACCOUNT} per account`, {
        hint: 'Close streams you no longer follow, or retry after the number of seconds in Retry-After.',
        headers: { 'Retry-After': '5' },
      });

    const admitInRedis = async (accountId: string, streamId: string): Promise<boolean | null> => {
      try {
        const now = Date.now();
        const admitted = (await redis.eval(
          ADMIT,
          1,
          setKey(accountId),
          now,
          now + leaseMs,
          settings.SSE_MAX_STREAMS_PER_ACCOUNT,
          streamId,
          leaseMs * 2,
        )) as number;
        redisWarned = false;
        return admitted === 1;
      } catch (error) {
        if (!redisWarned)
          app.log.warn({ err: { message: (error as Error).message } }, 'event stream count unavailable in Redis: counting on this edge only');
        redisWarned = true;
        return null;
      }
    };

    const closeStreamsOf = (keyIds: Set<string>) => {
      for (const stream of [...streams.values()]) {
        if (stream.keyId !== null && keyIds.has(stream.keyId))
          stream.close({ code: 'key_revoked', error: 'The key that opened this stream no longer works (disabled, revoked or expired)' });
      }
    };
    const recheck = async (keyIds: string[]) => {
      if (keyIds.length === 0) return;
      try {
        closeStreamsOf(await unusableKeys(sql, keyIds));
      } catch (error) {
        app.log.warn({ err: { message: (error as Error).message } }, 'could not re-check the keys of open event streams');
      }
    };

    // Approvers' streams: closed when the approver is removed (checked on the same period).
    const recheckMembers = async () => {
      const memberIds = [...new Set([...streams.values()].map((stream) => stream.memberId).filter((id): id is string => id !== null))];
      if (memberIds.length === 0) return;
      try {
        const gone = new Set(await removedMembers(sql, memberIds));
        for (const stream of [...streams.values()]) {
          if (stream.memberId !== null && gone.has(stream.memberId))
            stream.close({ code: 'invalid_session', error: 'This approver has been removed from the account' });
        }
      } catch (error) {
        app.log.warn({ err: { message: (error as Error).message } }, 'could not re-check the approvers of open event streams');
      }
    };

    const unsubscribe = app.keyVerifier.onChange((keyId) => {
      if ([...streams.values()].some((stream) => stream.keyId === keyId)) void recheck([keyId]);
    });
    const recheckTimer = setInterval(() => {
      void recheck([...new Set([...streams.values()].map((stream) => stream.keyId).filter((id): id is string => id !== null))]);
      void recheckMembers();
    }, settings.SSE_KEY_RECHECK_MS);
    recheckTimer.unref();
    // Leases are renewed at a third of their length, so a renewal may be missed twice.
    const renewTimer = setInterval(() => {
      const counted = [...streams.entries()].filter(([, stream]) => stream.counted === 'cluster');
      if (counted.length === 0) return;
      const pipeline = redis.pipeline();
      const expiry = Date.now() + leaseMs;
      for (const [streamId, stream] of counted) {
        pipeline.zadd(setKey(stream.accountId), 'XX', expiry, streamId);
        pipeline.pexpire(setKey(stream.accountId), leaseMs * 2);
      }
      pipeline.exec().catch(() => {});
    }, leaseMs / 3);
    renewTimer.unref();
    app.addHook('onClose', async () => {
      unsubscribe();
      clearInterval(recheckTimer);
      clearInterval(renewTimer);
    });

    const registry: EventStreams = {
      get size() {
        return streams.size;
      },
      async open(accountId, keyId, close, memberId = null) {
        const streamId = `${process.pid}-${randomBytes(8).toString('hex')}`;
        const inRedis = await admitInRedis(accountId, streamId);
        if (inRedis === false) throw refused();
        if (inRedis === null && (localCount.get(accountId) ?? 0) >= settings.SSE_MAX_STREAMS_PER_ACCOUNT) throw refused();
        const counted = inRedis ? 'cluster' : 'local';
        streams.set(streamId, { accountId, keyId, memberId, close, counted });
        localCount.set(accountId, (localCount.get(accountId) ?? 0) + 1);
        let released = false;
        return {
          release() {
            if (released) return;
            released = true;
            streams.delete(streamId);
            const left = (localCount.get(accountId) ?? 1) - 1;
            if (left > 0) localCount.set(accountId, left);
            else localCount.delete(accountId);
            if (counted === 'cluster') redis.zrem(setKey(accountId), streamId).catch(() => {});
          },
        };
      },
    };
    app.decorate('eventStreams', registry);
  },
  { name: 'event-streams', dependencies: ['deps', 'auth'] },
);
