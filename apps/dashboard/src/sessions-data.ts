// The response shapes come from the API's contracts (the same zod schemas the edge answers with).
import type { HumanStepView, SessionView, StepView } from '#contracts/cookbooks';

export type Session = SessionView;
export type HumanStep = HumanStepView;
export interface SessionDetail extends Session {
  cookbookTitle: string;
  steps: StepView[];
}

export const ACTIVE_STATUSES = new Set(['running', 'waiting_for_human']);
