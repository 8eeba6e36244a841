// The response shapes come from the generated OpenAPI types (packages/client), i.e. the same zod
// schemas the edge answers with.
import type { Answer } from './api';

export type Session = Answer<'/api/v1/cookbooks/sessions'>['sessions'][number];
export type HumanStep = Answer<'/api/v1/me/human-steps'>['humanSteps'][number];
/** What a human step shows of earlier steps' results. */
export type HumanStepContext = HumanStep['context'][number];

export const ACTIVE_STATUSES = new Set(['running', 'waiting_for_human']);
