// The response shapes come from the API's contracts (the same zod schemas the edge answers with).
import type { HumanStepView, SessionView, StepView } from '#contracts/cookbooks';

export type Session = SessionView;
export type HumanStep = HumanStepView;
export interface SessionDetail extends Session {
  cookbookTitle: string;
  steps: StepView[];
}

export const ACTIVE_STATUSES = new Set(['running', 'waiting_for_human']);

/**
 * Sessions this browser has shown, newest first, so ended sessions stay reachable from the
 * Sessions page (the API lists active sessions only). Kept per account in localStorage.
 */
const RECENT_LIMIT = 20;
const recentKey = (accountId: string) => `dashboard.recentSessions.${accountId}`;

export function readRecentSessions(accountId: string): string[] {
  try {
    const parsed: unknown = JSON.parse(window.localStorage.getItem(recentKey(accountId)) ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((id): id is string => typeof id === 'string') : [];
  } catch {
    return [];
  }
}

export function rememberSessions(accountId: string, sessionIds: string[]): void {
  if (sessionIds.length === 0) return;
  const merged = [...new Set([...sessionIds, ...readRecentSessions(accountId)])].slice(0, RECENT_LIMIT);
  try {
    window.localStorage.setItem(recentKey(accountId), JSON.stringify(merged));
  } catch {
    // Storage may be full or disabled; the list is a convenience.
  }
}
