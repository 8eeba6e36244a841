import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { z } from 'zod';
import { API_ID_PATTERN, CATEGORY_PATTERN } from '#contracts/directory';
import type { Db } from './sql.js';

export const cookbooksDir = fileURLToPath(new URL('../seed/cookbooks', import.meta.url));

const DURATION = /^(\d+)(s|m|h|d)$/;
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** "90s", "30m", "24h", "7d" -> milliseconds; null for anything else. */
export function parseDuration(text: string): number | null {
  const match = DURATION.exec(text);
  if (!match) return null;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

const duration = z.string().refine((value) => (parseDuration(value) ?? 0) > 0, 'must be a positive duration such as "90s", "30m", "24h" or "7d"');

/** Defaults when a step names no time limits; written down in docs/decisions/step-time-limits.md. */
export const DEFAULT_TIME_LIMITS = {
  agent: { expiresAfter: '7d' },
  human: { reminderAfter: '24h', expiresAfter: '72h' },
} as const;

const slotSchema = z.object({
  name: z.string().regex(/^[a-z][a-zA-Z0-9_]{0,63}$/, 'slot names are identifiers such as "sms" or "weatherSource"'),
  description: z.string().min(1),
  /** The kind of API that fits the slot: a directory category (test/edge/cookbooks.test.ts checks the catalog has it). */
  category: z.string().regex(CATEGORY_PATTERN, 'slot categories are directory categories such as "messaging" or "developer_tools"'),
  required: z.boolean(),
  /**
   * Directory API ids known to fit (`twilio.com-api`, not the provider `twilio.com`), as a hint to
   * whoever fills the slot; test/edge/cookbooks.test.ts checks the catalog holds each.
   */
  suggestedProviders: z.array(z.string().regex(API_ID_PATTERN, 'suggestedProviders are directory API ids such as "twilio.com-api"')).default([]),
});

const STEP_ID = /^[a-z][a-z0-9-]{0,63}$/;

/**
 * What a person needs to see from an earlier step to act on a human step: that step's result, or
 * only some of its top-level fields. Shown beside the instructions in the API and the dashboard.
 */
const contextSchema = z.object({
  from: z.string().regex(STEP_ID, 'from names an earlier step id'),
  fields: z.array(z.string().min(1)).min(1).optional(),
});

const stepSchema = z.object({
  stepId: z.string().regex(STEP_ID, 'step ids are lowercase words joined by hyphens'),
  title: z.string().min(1),
  kind: z.enum(['agent', 'human']),
  instructions: z.string().min(1),
  inputSchema: z.record(z.string(), z.unknown()),
  timeLimits: z.object({ reminderAfter: duration.optional(), expiresAfter: duration.optional() }).default({}),
  context: z.array(contextSchema).optional(),
  /**
   * Human steps: what a person may decide besides approving. `reject: true` ends the session as
   * completed with outcome rejected; `requestChanges: "<earlier agent step>"` sends it back there
   * with the person's note.
   */
  decisions: z
    .object({ reject: z.boolean().optional(), requestChanges: z.string().regex(STEP_ID).optional() })
    .strict()
    .optional(),
});

export const cookbookFileSchema = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,99}$/),
  title: z.string().min(1),
  description: z.string().min(1),
  category: z.string().min(1),
  slots: z.array(slotSchema).min(1),
  steps: z.array(stepSchema).min(1),
});

export type CookbookSlot = z.output<typeof slotSchema>;
export interface CookbookStep {
  stepId: string;
  title: string;
  kind: 'agent' | 'human';
  instructions: string;
  inputSchema: Record<string, unknown>;
  timeLimits: { reminderAfter?: string; expiresAfter: string };
  /** Human steps: what the person sees from earlier steps (all of a step's result, or some fields). */
  context?: StepContext[];
  /** Human steps: the decisions offered besides approving. */
  decisions?: { reject?: boolean; requestChanges?: string };
}
export interface StepContext {
  from: string;
  fields?: string[];
}
export interface Cookbook {
  id: string;
  title: string;
  description: string;
  category: string;
  slots: CookbookSlot[];
  steps: CookbookStep[];
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** One ajv instance for step result schemas: strict about the schemas, every error reported. */
export function createStepSchemaAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormats(ajv);
  return ajv;
}

const SLOT_REFERENCE = /\{\{\s*slots\.([a-zA-Z0-9_]+)\.(id|proxy)\s*\}\}/g;

/**
 * Checks a cookbook file: shape, unique slot names and step ids, slot references in instructions,
 * time limits that make sense, and every inputSchema compiled by ajv. Throws naming the file and
 * the problem.
 */
export function parseCookbook(raw: unknown, source: string, ajv: Ajv = createStepSchemaAjv()): Cookbook {
  const parsed = cookbookFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
    throw new Error(`${source}: ${issues}`);
  }
  const file = parsed.data;
  const slotNames = new Set<string>();
  for (const slot of file.slots) {
    if (slotNames.has(slot.name)) throw new Error(`${source}: slot "${slot.name}" is declared twice`);
    slotNames.add(slot.name);
  }
  const stepIds = new Set<string>();
  const steps: CookbookStep[] = file.steps.map((step) => {
    if (stepIds.has(step.stepId)) throw new Error(`${source}: step "${step.stepId}" is declared twice`);
    stepIds.add(step.stepId);
    for (const match of step.instructions.matchAll(SLOT_REFERENCE)) {
      if (!slotNames.has(match[1] ?? '')) throw new Error(`${source}: step "${step.stepId}" refers to unknown slot "${match[1]}"`);
    }
    if (step.inputSchema.type !== 'object') throw new Error(`${source}: step "${step.stepId}" inputSchema must describe an object`);
    try {
      ajv.compile(step.inputSchema);
    } catch (error) {
      throw new Error(`${source}: step "${step.stepId}" inputSchema is not a valid JSON schema: ${(error as Error).message}`);
    }
    checkContext(step, file.steps, source);
    checkDecisions(step, file.steps, source);
    checkApproval(step, source);
    const defaults = DEFAULT_TIME_LIMITS[step.kind];
    const timeLimits: CookbookStep['timeLimits'] = { expiresAfter: step.timeLimits.expiresAfter ?? defaults.expiresAfter };
    if (step.kind === 'human') timeLimits.reminderAfter = step.timeLimits.reminderAfter ?? DEFAULT_TIME_LIMITS.human.reminderAfter;
    else if (step.timeLimits.reminderAfter) timeLimits.reminderAfter = step.timeLimits.reminderAfter;
    if (timeLimits.reminderAfter && parseDuration(timeLimits.reminderAfter)! >= parseDuration(timeLimits.expiresAfter)!) {
      throw new Error(`${source}: step "${step.stepId}" reminderAfter must be shorter than expiresAfter`);
    }
    return { ...step, timeLimits };
  });
  return { id: file.id, title: file.title, description: file.description, category: file.category, slots: file.slots, steps };
}

/**
 * A human step's context must name earlier steps and, when it picks fields, fields those steps'
 * inputSchemas declare: what the person is shown is always what the agent was made to report.
 */
function checkContext(step: z.output<typeof stepSchema>, steps: z.output<typeof stepSchema>[], source: string): void {
  if (!step.context) return;
  if (step.kind !== 'human') throw new Error(`${source}: step "${step.stepId}" declares context, which only human steps show`);
  const position = steps.indexOf(step);
  for (const entry of step.context) {
    const earlier = steps.findIndex((candidate) => candidate.stepId === entry.from);
    if (earlier < 0 || earlier >= position)
      throw new Error(`${source}: step "${step.stepId}" context names "${entry.from}", which is not an earlier step`);
    const properties = (steps[earlier]!.inputSchema.properties ?? {}) as Record<string, unknown>;
    for (const field of entry.fields ?? []) {
      if (!(field in properties))
        throw new Error(`${source}: step "${step.stepId}" context field "${field}" is not in step "${entry.from}"'s inputSchema`);
    }
  }
}

/** Decisions belong to human steps; a request for changes goes back to an earlier agent step. */
function checkDecisions(step: z.output<typeof stepSchema>, steps: z.output<typeof stepSchema>[], source: string): void {
  if (!step.decisions) return;
  if (step.kind !== 'human') throw new Error(`${source}: step "${step.stepId}" declares decisions, which only human steps offer`);
  const backTo = step.decisions.requestChanges;
  if (backTo === undefined) return;
  const target = steps.findIndex((candidate) => candidate.stepId === backTo);
  if (target < 0 || target >= steps.indexOf(step) || steps[target]!.kind !== 'agent') {
    throw new Error(`${source}: step "${step.stepId}" requestChanges names "${backTo}", which is not an earlier agent step`);
  }
}

/**
 * A person declines a step by a decision (reject, request changes), never by completing it with a
 * "no": a human step's required yes/no fields can only say yes, or the session would carry on from
 * an approval that was not given.
 */
function checkApproval(step: z.output<typeof stepSchema>, source: string): void {
  if (step.kind !== 'human') return;
  const properties = (step.inputSchema.properties ?? {}) as Record<string, { type?: unknown; const?: unknown }>;
  for (const name of (step.inputSchema.required ?? []) as string[]) {
    const field = properties[name];
    if (field?.type === 'boolean' && field.const !== true) {
      throw new Error(
        `${source}: step "${step.stepId}" field "${name}" must be {"type": "boolean", "const": true}: a person declines with a decision (reject, request changes), not with false`,
      );
    }
  }
}

/** Reads and checks every *.json cookbook in a directory (sorted by file name). */
export async function readCookbookFiles(dir: string = cookbooksDir): Promise<Cookbook[]> {
  const ajv = createStepSchemaAjv();
  const names = (await readdir(dir)).filter((name) => name.endsWith('.json')).sort();
  const cookbooks: Cookbook[] = [];
  const ids = new Set<string>();
  for (const name of names) {
    const cookbook = parseCookbook(JSON.parse(await readFile(join(dir, name), 'utf8')), name, ajv);
    if (ids.has(cookbook.id)) throw new Error(`${name}: cookbook id "${cookbook.id}" is used by another file`);
    ids.add(cookbook.id);
    cookbooks.push(cookbook);
  }
  return cookbooks;
}

/** Upserts the repository's cookbooks into Postgres (idempotent); returns how many were loaded. */
export async function loadCookbooks(db: Db, dir: string = cookbooksDir): Promise<number> {
  const cookbooks = await readCookbookFiles(dir);
  for (const cookbook of cookbooks) await upsertCookbook(db, cookbook);
  return cookbooks.length;
}

export async function upsertCookbook(db: Db, cookbook: Cookbook): Promise<void> {
  await db`
    insert into cookbooks (id, title, description, category, slots, steps)
    values (${cookbook.id}, ${cookbook.title}, ${cookbook.description}, ${cookbook.category},
            ${db.json(cookbook.slots as never)}, ${db.json(cookbook.steps as never)})
    on conflict (id) do update set
      title = excluded.title, description = excluded.description, category = excluded.category,
      slots = excluded.slots, steps = excluded.steps, updated_at = now()
    where (cookbooks.title, cookbooks.description, cookbooks.category, cookbooks.slots, cookbooks.steps)
      is distinct from (excluded.title, excluded.description, excluded.category, excluded.slots, excluded.steps)`;
}

export async function getCookbook(db: Db, id: string): Promise<Cookbook | null> {
  const [row] = await db<Cookbook[]>`select id, title, description, category, slots, steps from cookbooks where id = ${id}`;
  return row ?? null;
}

/** A cookbook with its version (`updated_at` to the microsecond, as text), read together. */
export async function getCookbookWithVersion(db: Db, id: string): Promise<{ cookbook: Cookbook; version: string } | null> {
  const [row] = await db<(Cookbook & { version: string })[]>`
    select id, title, description, category, slots, steps, updated_at::text as version from cookbooks where id = ${id}`;
  if (!row) return null;
  const { version, ...cookbook } = row;
  return { cookbook, version };
}

export interface CookbookListQuery {
  q?: string | undefined;
  category?: string | undefined;
  limit: number;
  /** The id of the last cookbook of the previous page. */
  after?: string | undefined;
}

/**
 * Cookbooks matching a free-text query (full text on title, description and category, or a
 * substring of them) and/or a category, ordered by id for stable keyset paging.
 */
export async function listCookbooks(db: Db, query: CookbookListQuery): Promise<{ cookbooks: Cookbook[]; nextCursor: string | null }> {
  const q = query.q?.trim() || null;
  const like = q === null ? null : `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await db<Cookbook[]>`
    select id, title, description, category, slots, steps from cookbooks
    where (${q}::text is null
           or search @@ websearch_to_tsquery('english', ${q})
           or title ilike ${like} or description ilike ${like} or category ilike ${like})
      and (${query.category ?? null}::text is null or lower(category) = lower(${query.category ?? null}))
      and (${query.after ?? null}::text is null or id > ${query.after ?? null})
    order by id
    limit ${query.limit + 1}`;
  const page = rows.slice(0, query.limit);
  return { cookbooks: page, nextCursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null };
}

/** Replaces {{slots.<name>.id}} and {{slots.<name>.proxy}} with the session's chosen APIs. */
export function renderInstructions(instructions: string, selectedApis: Record<string, string>): string {
  return instructions.replace(SLOT_REFERENCE, (_whole, name: string, field: string) => {
    const apiId = selectedApis[name];
    if (!apiId) return `(slot "${name}" not filled)`;
    return field === 'id' ? apiId : `/api/v1/proxy/${apiId}`;
  });
}
