import type { Redis } from 'ioredis';
import { FINAL_EVENTS, type SessionEvent } from '#workflows/messages';

/** Redis stream holding one session's events; entry ids are `<seq>-0`, seq numbered by the workflow. */
export const sessionEventsKey = (prefix: string, sessionId: string) => `${prefix}:session-events:${sessionId}`;
/** Pub/sub channel announcing "this session's stream grew": the message is the session id. */
export const sessionEventsChannel = (prefix: string) => `${prefix}:session-events`;
/** How long an ended session's event stream stays readable. */
export const ENDED_STREAM_TTL_SECONDS = 30 * 24 * 3600;

const ALREADY_APPENDED = /equal or smaller than the target stream top item/i;

/**
 * Appends events to the session's stream with the ids the workflow numbered (`<seq>-0`). An event
 * already there (an activity retry, a restarted worker) is skipped by Redis itself, so every event
 * is in the stream exactly once and in order. Followers are then told through pub/sub.
 */
export async function appendSessionEvents(redis: Redis, prefix: string, sessionId: string, events: SessionEvent[]): Promise<void> {
  if (events.length === 0) return;
  const key = sessionEventsKey(prefix, sessionId);
  for (const event of events) {
    try {
      await redis.xadd(key, `${event.seq}-0`, 'event', event.name, 'data', JSON.stringify(event.data));
    } catch (error) {
      if (!ALREADY_APPENDED.test((error as Error).message)) throw error;
    }
  }
  if (events.some((event) => FINAL_EVENTS.includes(event.name))) await redis.expire(key, ENDED_STREAM_TTL_SECONDS);
  await redis.publish(sessionEventsChannel(prefix), sessionId);
}
