export { appendSessionEvents, sessionEventsKey } from './event-stream.js';
export { readSessionEvents, STREAM_ID, SessionEventHub } from './events.js';
export type { EventPage } from './events.js';
export type { StreamedEvent } from './events.js';
export {
  agentKeyScope,
  cancelSession,
  checkDecision,
  completeStep,
  humanStepView,
  isEnded,
  listPendingHumanSteps,
  listSessionSteps,
  priorCompletion,
  requireSession,
  requireSessionAndCookbook,
  completionUpdateId,
  sessionView,
  sessionWorkflowOptions,
  slotViews,
  startSession,
  stepPlan,
  stepPlans,
  stepView,
  validateResultData,
} from './sessions.js';
export { CookbookCache } from './cookbook-cache.js';
export { assertApproverMayComplete, assignStep, listCookbookPage, listSessionPage, requireCookbook } from './catalog.js';
export type { Cookbook, CookbookStep } from './catalog.js';
