import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { buildApp, type BuildOptions } from '#edge/app';
import { testEdgeSettings } from './settings.js';

/** Builds an edge app against the real services. Routes may still be added before the first inject. */
export async function createTestApp(overrides: Record<string, string> = {}, options: BuildOptions = {}): Promise<FastifyInstance> {
  return buildApp(testEdgeSettings(overrides), options);
}

export { createTestAccount, type TestAccount } from '#fixtures/accounts';

export const bearer = (fullKey: string) => ({ authorization: `Bearer ${fullKey}` });

/** Asserts the specification's error shape and status; on failure the message shows the response. */
export function expectError(res: LightMyRequestResponse | { statusCode: number; body: string }, status: number, code?: string) {
  const context = `response was ${res.statusCode}: ${res.body}`;
  expect(res.statusCode, context).toBe(status);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(body.ok, context).toBe(false);
  expect(typeof body.error, context).toBe('string');
  expect((body.error as string).length, context).toBeGreaterThan(0);
  if (code) expect(body.code, context).toBe(code);
  if ('hint' in body) expect(typeof body.hint, context).toBe('string');
  return body;
}

/** Parses a success body and asserts status and `ok: true`, showing the response on failure. */
export function expectOk<T = Record<string, unknown>>(res: LightMyRequestResponse, status = 200): T & { ok: true } {
  const context = `response was ${res.statusCode}: ${res.body}`;
  expect(res.statusCode, context).toBe(status);
  const body = JSON.parse(res.body) as T & { ok: true };
  expect(body.ok, context).toBe(true);
  return body;
}
