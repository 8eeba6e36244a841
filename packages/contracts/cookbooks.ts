import { z } from 'zod';
import { callability } from './directory.js';

// The cookbook and session shapes of the API: the routes' response schemas (and so the OpenAPI
// document), core's view types and the dashboard's types all come from here.

export const jsonObject = z.record(z.string(), z.unknown());

export const slotSchema = z.object({
  name: z.string(),
  description: z.string(),
  category: z.string(),
  required: z.boolean(),
  suggestedProviders: z.array(z.string()).describe("The cookbook's suggestions, the ones the caller can call now first"),
});
/** A slot as GET /cookbooks/{id} shows it to a caller: its suggestions that are directory APIs, with their state for that caller. */
export const slotViewSchema = slotSchema.extend({
  suggestions: z
    .array(z.object({ apiId: z.string(), callability }))
    .describe('The suggested APIs that are in the directory, callable now first (ready, then needs_key / needs_oauth, then unavailable)'),
});
export const timeLimitsSchema = z.object({ reminderAfter: z.string().optional(), expiresAfter: z.string() });
/** A human step's declaration of what it shows from earlier steps (all of a result, or some fields). */
export const stepContextDeclarationSchema = z.object({ from: z.string(), fields: z.array(z.string()).optional() });
export const cookbookStepSchema = z.object({
  stepId: z.string(),
  title: z.string(),
  kind: z.enum(['agent', 'human']),
  instructions: z.string(),
  inputSchema: jsonObject,
  timeLimits: timeLimitsSchema,
  context: z.array(stepContextDeclarationSchema).optional(),
  decisions: z.object({ reject: z.boolean().optional(), requestChanges: z.string().optional() }).optional(),
});
export const cookbookSummarySchema = z.object({
  id: z.string(),
  title: z.string(),
  description: z.string(),
  category: z.string(),
  slots: z.array(slotSchema.pick({ name: true, category: true, required: true })),
  stepCount: z.number().int(),
  humanSteps: z.number().int(),
});
export const cookbookSchema = z.object({
  id: z.string(),
  title: z.string(),
  description: z.string(),
  category: z.string(),
  slots: z.array(slotViewSchema),
  steps: z.array(cookbookStepSchema),
});
export const statusSchema = z.enum(['running', 'waiting_for_human', 'completed', 'failed', 'cancelled', 'expired']);
export const sessionSchema = z.object({
  sessionId: z.string(),
  cookbookId: z.string(),
  status: statusSchema,
  currentStep: z.string().nullable(),
  progress: z.object({ completed: z.number().int(), total: z.number().int() }),
  selectedApis: z.record(z.string(), z.string()),
  startedAt: z.string(),
  updatedAt: z.string(),
  endedAt: z.string().nullable(),
  outcome: z.enum(['rejected']).nullable().describe('How a completed session came out when a person decided it: rejected (later steps did not run)'),
});
export const stepSchema = z.object({
  stepId: z.string(),
  title: z.string(),
  kind: z.enum(['agent', 'human']),
  position: z.number().int(),
  instructions: z.string().nullable().describe('null for a step the session has not reached yet (buy the whole cookbook with GET /cookbooks/{id})'),
  inputSchema: jsonObject.nullable().describe('null for a step the session has not reached yet'),
  timeLimits: timeLimitsSchema,
  completedBy: z.enum(['key', 'human']),
  completedByName: z.string().nullable().describe("Who completed the step: the key's name, or the email of the person signed in to the dashboard"),
  status: z.enum(['pending', 'completed', 'expired', 'cancelled', 'upcoming']),
  startedAt: z.string().nullable(),
  remindAt: z.string().nullable(),
  expiresAt: z.string().nullable(),
  completedAt: z.string().nullable(),
  resultData: jsonObject.nullable(),
  decision: z.enum(['approve', 'reject', 'request_changes']).nullable().describe('Human steps: what the person decided'),
  note: z.string().nullable().describe("Human steps: the person's note with the decision"),
  feedback: z
    .object({ fromStepId: z.string(), note: z.string() })
    .nullable()
    .describe('An agent step a person sent the session back to: what they asked to change'),
});
/**
 * What a person sees from earlier steps to act on a human step, as the cookbook declares it: per
 * earlier step, the named fields of its result (a field the agent left out has value null).
 */
export const humanStepContextSchema = z.object({
  stepId: z.string(),
  title: z.string(),
  fields: z.array(z.object({ name: z.string(), value: z.unknown() })),
});
export const humanStepSchema = z.object({
  sessionId: z.string(),
  cookbookId: z.string(),
  cookbookTitle: z.string(),
  stepId: z.string(),
  title: z.string(),
  instructions: z.string(),
  context: z.array(humanStepContextSchema).describe("What the person needs from earlier steps, from the cookbook's context declaration"),
  decisions: z
    .object({ reject: z.boolean(), requestChanges: z.object({ backTo: z.string(), title: z.string() }).nullable() })
    .describe('What the person may decide besides approving (complete-step with decision reject or request_changes)'),
  inputSchema: jsonObject,
  changesRequested: z
    .object({ note: z.string(), stepId: z.string(), title: z.string() })
    .nullable()
    .describe('When a person sent this step back earlier (request_changes): their note, and the step the session went back to for it'),
  pendingSince: z.string(),
  remindAt: z.string().nullable(),
  expiresAt: z.string().nullable(),
  reminders: z.number().int(),
  assignee: z
    .object({ id: z.string(), email: z.string() })
    .nullable()
    .describe('The approver the step is assigned to (PUT .../steps/{stepId}/assignee); null: the first person to take it'),
});

export type SessionStatus = z.infer<typeof statusSchema>;
export type SessionView = z.infer<typeof sessionSchema>;
export type StepView = z.infer<typeof stepSchema>;
export type HumanStepView = z.infer<typeof humanStepSchema>;
export type HumanStepContextView = z.infer<typeof humanStepContextSchema>;
export type CookbookSummaryView = z.infer<typeof cookbookSummarySchema>;
export type CookbookView = z.infer<typeof cookbookSchema>;
