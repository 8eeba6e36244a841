import type { SessionChange, SessionStatus, StepRecord } from '#workflows/messages';
import type { Db, Sql } from './sql.js';

export interface SessionRow {
  id: string;
  account_id: string;
  cookbook_id: string;
  workflow_id: string;
  status: SessionStatus;
  current_step_id: string | null;
  completed_steps: number;
  total_steps: number;
  selected_apis: Record<string, string>;
  idempotency_key: string | null;
  version: number;
  started_at: Date;
  updated_at: Date;
  ended_at: Date | null;
  outcome: 'rejected' | null;
  /** The key that started the session (API or agent key); null when a person started it in the dashboard, or before this was recorded. */
  started_by_key_id: string | null;
}

export interface StepRow {
  session_id: string;
  step_id: string;
  position: number;
  kind: 'agent' | 'human';
  status: StepRecord['status'];
  result_data: Record<string, unknown> | null;
  completed_by: 'key' | 'human' | null;
  started_at: Date;
  remind_at: Date | null;
  expires_at: Date | null;
  reminders: number;
  completed_at: Date | null;
  /** The key's name or the person's email, when the edge recorded who completed the step. */
  completer_name?: string | null;
  decision?: 'approve' | 'reject' | 'request_changes' | null;
  note?: string | null;
  feedback?: { fromStepId: string; note: string } | null;
}

export const SESSION_COLUMNS = `id, account_id, cookbook_id, workflow_id, status, current_step_id, completed_steps, total_steps,
  selected_apis, idempotency_key, version, started_at, updated_at, ended_at, outcome, started_by_key_id`;

export interface NewSessionRow {
  sessionId: string;
  accountId: string;
  cookbookId: string;
  workflowId: string;
  totalSteps: number;
  firstStepId: string;
  selectedApis: Record<string, string>;
  idempotencyKey: string | null;
  startedAt: Date;
  /** The key that started it; null for the dashboard. */
  startedByKeyId?: string | null;
}

/**
 * The mirror row the edge writes once the workflow has started (version 0). The workflow's own
 * first transition may have written it already (it does not know the starting key); then only the
 * starting key is added, and the first one recorded stands.
 */
export async function insertStartedSession(db: Db, row: NewSessionRow): Promise<void> {
  await db`
    insert into cookbook_sessions as s (id, account_id, cookbook_id, workflow_id, status, current_step_id, total_steps,
                                        selected_apis, idempotency_key, version, started_at, updated_at, started_by_key_id)
    values (${row.sessionId}, ${row.accountId}, ${row.cookbookId}, ${row.workflowId}, 'running', ${row.firstStepId},
            ${row.totalSteps}, ${db.json(row.selectedApis)}, ${row.idempotencyKey}, 0, ${row.startedAt}, ${row.startedAt},
            ${row.startedByKeyId ?? null})
    on conflict (id) do update set started_by_key_id = excluded.started_by_key_id
    where s.started_by_key_id is null and excluded.started_by_key_id is not null`;
}

/** How many of the account's sessions are active (running or waiting for a human). */
export async function countActiveSessions(db: Db, accountId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from cookbook_sessions where account_id = ${accountId} and status in ('running', 'waiting_for_human')`;
  return row?.n ?? 0;
}

/**
 * Applies one workflow transition to the mirror in a transaction. Idempotent and ordered: a
 * transition older than (or equal to) what the row holds changes nothing, so activity retries and
 * late attempts never move the mirror backwards.
 */
export async function applySessionChange(sql: Sql, change: SessionChange, workflowId: string): Promise<boolean> {
  const { input, session } = change;
  return sql.begin(async (tx) => {
    const applied = await tx`
      insert into cookbook_sessions as s (id, account_id, cookbook_id, workflow_id, status, current_step_id, completed_steps,
                                          total_steps, selected_apis, idempotency_key, version, started_at, updated_at, ended_at, outcome)
      values (${input.sessionId}, ${input.accountId}, ${input.cookbookId}, ${workflowId}, ${session.status}, ${session.currentStep},
              ${session.progress.completed}, ${session.progress.total}, ${tx.json(input.selectedApis)}, ${input.idempotencyKey},
              ${session.version}, ${session.startedAt}, ${session.updatedAt}, ${change.endedAt}, ${session.outcome ?? null})
      on conflict (id) do update set
        status = excluded.status, current_step_id = excluded.current_step_id, completed_steps = excluded.completed_steps,
        version = excluded.version, updated_at = excluded.updated_at, ended_at = excluded.ended_at, outcome = excluded.outcome
      where s.version < excluded.version
      returning id`;
    if (applied.length === 0) return false;
    for (const step of change.steps) {
      const by = step.completer;
      const keyId = by && 'keyId' in by ? by.keyId : null;
      const personId = by && 'personId' in by ? by.personId : null;
      const memberId = by && 'memberId' in by ? by.memberId : null;
      // The member is looked up rather than trusted: a foreign-key failure here would end the session as orphaned.
      await tx`
        insert into cookbook_session_steps (session_id, step_id, position, kind, status, result_data, completed_by,
                                            started_at, remind_at, expires_at, reminders, completed_at, decision, note, feedback,
                                            completed_by_key_id, completed_by_person_id, completed_by_member_id)
        values (${input.sessionId}, ${step.stepId}, ${step.position}, ${step.kind}, ${step.status},
                ${step.resultData === null ? null : tx.json(step.resultData as never)}, ${step.completedBy},
                ${step.startedAt}, ${step.remindAt}, ${step.expiresAt}, ${step.reminders}, ${step.completedAt},
                ${step.decision ?? null}, ${step.note ?? null}, ${step.feedback ? tx.json(step.feedback as never) : null},
                ${keyId}, ${personId}, (select id from account_members where id = ${memberId}::text))
        on conflict (session_id, step_id) do update set
          status = excluded.status, result_data = excluded.result_data, completed_by = excluded.completed_by,
          remind_at = excluded.remind_at, reminders = excluded.reminders, completed_at = excluded.completed_at,
          -- A step run again (a person requested changes) starts afresh.
          started_at = excluded.started_at, expires_at = excluded.expires_at,
          decision = excluded.decision, note = excluded.note, feedback = excluded.feedback,
          -- Who completed it: the first record stands (a retried transition does not overwrite it).
          completed_by_key_id = case when excluded.status = 'pending' then null else coalesce(cookbook_session_steps.completed_by_key_id, excluded.completed_by_key_id) end,
          completed_by_person_id = case when excluded.status = 'pending' then null else coalesce(cookbook_session_steps.completed_by_person_id, excluded.completed_by_person_id) end,
          completed_by_member_id = case when excluded.status = 'pending' then null else coalesce(cookbook_session_steps.completed_by_member_id, excluded.completed_by_member_id) end`;
    }
    return true;
  });
}

/**
 * The account's session; with `agentKeyId`, only if that agent key started it (null: any of the
 * account's sessions, for its API keys and dashboard).
 */
export async function findSession(db: Db, accountId: string, sessionId: string, agentKeyId: string | null = null): Promise<SessionRow | null> {
  const [row] = await db<SessionRow[]>`
    select ${db.unsafe(SESSION_COLUMNS)} from cookbook_sessions
    where id = ${sessionId} and account_id = ${accountId} and (${agentKeyId}::text is null or started_by_key_id = ${agentKeyId})`;
  return row ?? null;
}

/**
 * The session row with its cookbook's version (`updated_at` to the microsecond, as text), read in the
 * same round trip, so the caller can use a cached cookbook definition only while it is current.
 */
export async function findSessionWithCookbookVersion(
  db: Db,
  accountId: string,
  sessionId: string,
  agentKeyId: string | null = null,
): Promise<(SessionRow & { cookbook_version: string }) | null> {
  const [row] = await db<(SessionRow & { cookbook_version: string })[]>`
    select ${db.unsafe(SESSION_COLUMNS)},
           (select c.updated_at::text from cookbooks c where c.id = cookbook_sessions.cookbook_id) as cookbook_version
    from cookbook_sessions
    where id = ${sessionId} and account_id = ${accountId} and (${agentKeyId}::text is null or started_by_key_id = ${agentKeyId})`;
  return row ?? null;
}

export async function findSessionByIdempotencyKey(db: Db, accountId: string, key: string): Promise<SessionRow | null> {
  const [row] = await db<SessionRow[]>`
    select ${db.unsafe(SESSION_COLUMNS)} from cookbook_sessions where account_id = ${accountId} and idempotency_key = ${key}`;
  return row ?? null;
}

/**
 * One page of the account's active sessions (running or waiting for a human), newest first. The
 * cursor is the id of the last session of the previous page; paging continues after it even when
 * that session has ended since. An unknown cursor answers null.
 */
export async function listSessions(
  db: Db,
  accountId: string,
  page: { limit: number; after?: string | undefined; status?: SessionListStatus; agentKeyId?: string | null },
): Promise<{ sessions: SessionRow[]; nextCursor: string | null } | null> {
  let after: { started_at: Date; id: string } | null = null;
  if (page.after !== undefined) {
    const [row] = await db<{ started_at: Date; id: string }[]>`
      select started_at, id from cookbook_sessions where id = ${page.after} and account_id = ${accountId}`;
    if (!row) return null;
    after = row;
  }
  const statuses = STATUS_FILTER[page.status ?? 'active'];
  const agentKeyId = page.agentKeyId ?? null;
  // started_at is compared in SQL (microseconds), never through a JS Date (milliseconds).
  const rows = await db<SessionRow[]>`
    select ${db.unsafe(SESSION_COLUMNS)} from cookbook_sessions
    where account_id = ${accountId}
      and (${agentKeyId}::text is null or started_by_key_id = ${agentKeyId})
      and (${statuses}::text[] is null or status = any(${statuses}::text[]))
      and (${after?.id ?? null}::text is null
           or (started_at, id) < (select started_at, id from cookbook_sessions where id = ${after?.id ?? null}::text))
    order by started_at desc, id desc
    limit ${page.limit + 1}`;
  const sessions = rows.slice(0, page.limit);
  return { sessions, nextCursor: rows.length > page.limit ? sessions[sessions.length - 1]!.id : null };
}

export async function listSessionSteps(db: Db, sessionId: string): Promise<StepRow[]> {
  return db<StepRow[]>`
    select st.session_id, st.step_id, st.position, st.kind, st.status, st.result_data, st.completed_by, st.started_at,
           st.remind_at, st.expires_at, st.reminders, st.completed_at, st.decision, st.note, st.feedback,
           coalesce(k.name, mb.email, a.email) as completer_name
    from cookbook_session_steps st
    left join api_keys k on k.id = st.completed_by_key_id
    left join account_members mb on mb.id = st.completed_by_member_id
    left join accounts a on a.id = st.completed_by_person_id
    where st.session_id = ${sessionId} order by st.position`;
}

export type SessionListStatus = 'active' | 'ended' | 'all';
const STATUS_FILTER: Record<SessionListStatus, string[] | null> = {
  active: ['running', 'waiting_for_human'],
  ended: ['completed', 'failed', 'cancelled', 'expired'],
  all: null,
};

export interface PendingHumanStepRow extends StepRow {
  cookbook_id: string;
  cookbook_title: string;
  steps: {
    stepId: string;
    title: string;
    instructions: string;
    inputSchema: Record<string, unknown>;
    context?: { from: string; fields?: string[] }[];
    decisions?: { reject?: boolean; requestChanges?: string };
  }[];
  selected_apis: Record<string, string>;
  /** The results of the session's earlier steps, by step id (what the step's context draws on). */
  prior_results: Record<string, Record<string, unknown> | null> | null;
  /** The approver the step is assigned to; null for the first taker. */
  assignee_id: string | null;
  assignee_email: string | null;
  /** The latest request for changes made on this step: the step it sent the session back to, with the note it carried. */
  changes_requested: { step_id: string; note: string } | null;
}

/**
 * Human steps waiting for a person, for one session or across all of an account's sessions, with the
 * approver each is assigned to. For an approver (`forMember`), only the steps assigned to them or to
 * the first taker. For an agent key (`agentKeyId`), only in the sessions it started.
 */
export async function listPendingHumanSteps(
  db: Db,
  accountId: string,
  sessionId: string | null,
  forMember: string | null = null,
  agentKeyId: string | null = null,
): Promise<PendingHumanStepRow[]> {
  return db<PendingHumanStepRow[]>`
    select st.session_id, st.step_id, st.position, st.kind, st.status, st.result_data, st.completed_by, st.started_at,
           st.remind_at, st.expires_at, st.reminders, st.completed_at,
           s.cookbook_id, c.title as cookbook_title, c.steps, s.selected_apis,
           (select jsonb_object_agg(p.step_id, p.result_data) from cookbook_session_steps p
             where p.session_id = st.session_id and p.position < st.position) as prior_results,
           (select jsonb_build_object('step_id', f.step_id, 'note', f.feedback->>'note') from cookbook_session_steps f
             where f.session_id = st.session_id and f.feedback->>'fromStepId' = st.step_id
             order by f.position desc limit 1) as changes_requested,
           m.id as assignee_id, m.email as assignee_email
    from cookbook_session_steps st
    join cookbook_sessions s on s.id = st.session_id
    join cookbooks c on c.id = s.cookbook_id
    left join human_step_assignments ha on ha.session_id = st.session_id and ha.step_id = st.step_id
    left join account_members m on m.id = ha.member_id and m.removed_at is null
    where s.account_id = ${accountId} and s.status = 'waiting_for_human'
      and st.kind = 'human' and st.status = 'pending'
      and (${sessionId}::text is null or s.id = ${sessionId})
      and (${agentKeyId}::text is null or s.started_by_key_id = ${agentKeyId})
      and (${forMember}::text is null or m.id is null or m.id = ${forMember})
    order by st.started_at, st.session_id`;
}
