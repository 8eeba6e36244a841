import { expect } from 'vitest';
import type { Db } from '#db/sql';
import { createTestApi } from '#fixtures/temporal';

/** A JSON answer of the edge, with its text kept for failure messages. */
export interface EdgeAnswer {
  status: number;
  text: string;
  body: Record<string, unknown>;
}

export interface EdgeCall {
  method?: string;
  /** A full key, sent as `Authorization: Bearer`; the client's default key when left out. */
  key?: string;
  cookie?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export type CallEdge = (path: string, init?: EdgeCall) => Promise<EdgeAnswer>;

/**
 * JSON calls over HTTP to an edge that listens, as an agent or a script makes them beside a browser
 * test. `origin` and `defaultKey` are read at every call: a test learns its port and its key in
 * beforeAll or in an earlier test.
 */
export function edgeClient(origin: () => string, defaultKey: () => string | undefined = () => undefined): CallEdge {
  return async (path, init = {}) => {
    const headers: Record<string, string> = { accept: 'application/json', ...init.headers };
    const key = init.key ?? defaultKey();
    if (key) headers.authorization = `Bearer ${key}`;
    if (init.cookie) headers.cookie = init.cookie;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${origin()}${path}`, {
      method: init.method ?? 'GET',
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    return { status: res.status, text, body: JSON.parse(text) as Record<string, unknown> };
  };
}

/** Expects `status`; on failure the message shows the answer's text. */
export function expectStatus(res: { status: number; text: string }, status: number): void {
  expect(res.status, `response was ${res.status}: ${res.text}`).toBe(status);
}

/**
 * Starts a weather-alert session with `key`, as an agent would, and completes its two agent steps:
 * the session then waits at its human step (approve-wording). Returns the session's id.
 */
export async function weatherSessionAtApproval(call: CallEdge, sql: Db, key: string): Promise<string> {
  const selectedApis = { weather: await createTestApi(sql, 'weather'), sms: await createTestApi(sql, 'sms') };
  const started = await call('/api/v1/cookbooks/weather-alert-sms/start', { method: 'POST', key, body: { selectedApis } });
  expectStatus(started, 201);
  const id = (started.body.session as { sessionId: string }).sessionId;
  const agent = (stepId: string, resultData: unknown) =>
    call(`/api/v1/cookbooks/sessions/${id}/complete-step`, { method: 'POST', key, body: { stepId, resultData } });
  expectStatus(
    await agent('fetch-forecast', { location: { name: 'Bergen', lat: 60.39, lon: 5.32 }, severe: true, alerts: [{ title: 'Gale' }] }),
    200,
  );
  expectStatus(await agent('draft-message', { message: `Gale warning ${id}.`, recipients: ['+4712345678'] }), 200);
  return id;
}
