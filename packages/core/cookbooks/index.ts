export { appendSessionEvents, sessionEventsKey } from './event-stream.js';
export { readSessionEvents, STREAM_ID, SessionEventHub } from './events.js';
export type { EventPage } from './events.js';
export type { StreamedEvent } from './events.js';
export { cancelSession, completeStep, humanStepView, isEnded, listPendingHumanSteps, listSessionSteps, priorCompletion, requireSession, requireSessionAndCookbook, completionUpdateId, sessionView, sessionWorkflowOptions, startSession, stepPlans, stepView, validateResultData } from './sessions.js';
export { CookbookCache } from './cookbook-cache.js';
