export interface Session {
  sessionId: string;
  cookbookId: string;
  status: string;
  currentStep: string | null;
  progress: { completed: number; total: number };
  selectedApis: Record<string, string>;
  startedAt: string;
  updatedAt: string;
  endedAt?: string | null;
}

export interface StepView {
  stepId: string;
  title: string;
  kind: 'agent' | 'human';
  instructions: string;
  inputSchema: Record<string, unknown>;
  status: string;
  startedAt: string | null;
  expiresAt: string | null;
  completedAt: string | null;
}

export interface SessionDetail extends Session {
  cookbookTitle: string;
  steps: StepView[];
}

export interface HumanStep {
  sessionId: string;
  cookbookId: string;
  cookbookTitle: string;
  stepId: string;
  title: string;
  instructions: string;
  inputSchema: Record<string, unknown>;
  pendingSince: string;
  remindAt: string | null;
  expiresAt: string | null;
  reminders: number;
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
