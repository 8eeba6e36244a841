import { useCallback, useEffect, useRef, useState } from 'react';
import { apiPath } from './api';

/** Event names of a cookbook session's stream (see the cookbook workflow). */
export const SESSION_EVENT_NAMES = [
  'session.started',
  'step.started',
  'step.completed',
  'human_step.pending',
  'human_step.reminder',
  'human_step.completed',
  'session.completed',
  'session.failed',
  'session.expired',
  'session.cancelled',
] as const;
const FINAL = new Set<string>(['session.completed', 'session.failed', 'session.expired', 'session.cancelled']);

export interface SessionEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
  sessionId: string;
}

export type StreamState = 'connecting' | 'live' | 'ended' | 'retrying';

/**
 * Follows the SSE streams of the given sessions (EventSource with the session cookie), calling
 * onEvent for each event. A stream replays the session's history first, then follows live; it is
 * closed after the session's final event so the browser does not reconnect to a finished stream.
 */
export function useSessionStreams(sessionIds: string[], onEvent: (event: SessionEvent) => void): Record<string, StreamState> {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const sources = useRef(new Map<string, EventSource>());
  const [states, setStates] = useState<Record<string, StreamState>>({});
  const key = [...new Set(sessionIds)].sort().join(',');

  useEffect(() => {
    const wanted = new Set(key ? key.split(',') : []);
    const setState = (id: string, state: StreamState) => setStates((previous) => (previous[id] === state ? previous : { ...previous, [id]: state }));
    for (const [id, source] of sources.current) {
      if (!wanted.has(id)) {
        source.close();
        sources.current.delete(id);
      }
    }
    for (const id of wanted) {
      if (sources.current.has(id)) continue;
      const source = new EventSource(apiPath(`/cookbooks/sessions/${encodeURIComponent(id)}/events`), { withCredentials: true });
      sources.current.set(id, source);
      setState(id, 'connecting');
      source.onopen = () => setState(id, 'live');
      source.onerror = () => setState(id, source.readyState === EventSource.CLOSED ? 'ended' : 'retrying');
      for (const name of SESSION_EVENT_NAMES) {
        source.addEventListener(name, (message: MessageEvent<string>) => {
          let data: Record<string, unknown> = {};
          try {
            data = JSON.parse(message.data) as Record<string, unknown>;
          } catch {
            data = {};
          }
          handler.current({ id: message.lastEventId, name, data, sessionId: id });
          if (FINAL.has(name)) {
            source.close();
            setState(id, 'ended');
          }
        });
      }
    }
  }, [key]);

  useEffect(() => {
    const all = sources.current;
    return () => {
      for (const source of all.values()) source.close();
      all.clear();
    };
  }, []);

  return states;
}

/** Re-runs `tick` every `ms` while the page is visible (used to notice sessions started elsewhere). */
export function useInterval(tick: () => void, ms: number): void {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    const timer = window.setInterval(() => {
      if (document.visibilityState === 'visible') saved.current();
    }, ms);
    return () => window.clearInterval(timer);
  }, [ms]);
}

/**
 * A trailing-edge debounce of `action`: a burst of calls within `ms` runs it once. A stream replays
 * a session's whole history on connect, and each event would otherwise re-read the same data.
 */
export function useCoalesced(action: () => void, ms: number): () => void {
  const saved = useRef(action);
  saved.current = action;
  const timer = useRef<number | null>(null);
  useEffect(
    () => () => {
      if (timer.current !== null) window.clearTimeout(timer.current);
    },
    [],
  );
  return useCallback(() => {
    if (timer.current !== null) window.clearTimeout(timer.current);
    timer.current = window.setTimeout(() => {
      timer.current = null;
      saved.current();
    }, ms);
  }, [ms]);
}
