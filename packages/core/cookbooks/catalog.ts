import { listSessions, type SessionListStatus, type SessionRow } from '#db/cookbook-sessions';
import { getCookbook, listCookbooks, type Cookbook, type CookbookStep } from '#db/cookbooks';
import { assignHumanStep, findAssignee, findMember } from '#db/members';
import type { Db } from '#db/sql';
import { notFound, PlatformError } from '#core/platform';

/** The cookbook; 404 when there is none of that id. */
export async function requireCookbook(db: Db, id: string): Promise<Cookbook> {
  const cookbook = await getCookbook(db, id);
  if (!cookbook) throw notFound(`Cookbook ${id}`, 'List cookbooks with GET /api/v1/cookbooks.');
  return cookbook;
}

/** One page of cookbooks, filtered by free text and category; the cursor is the previous page's nextCursor. */
export function listCookbookPage(
  db: Db,
  query: { q?: string | undefined; category?: string | undefined; limit: number; cursor?: string | undefined },
): Promise<{ cookbooks: Cookbook[]; nextCursor: string | null }> {
  return listCookbooks(db, { q: query.q, category: query.category, limit: query.limit, after: query.cursor });
}

/** One page of the account's sessions (for an agent key, those it started); a cursor not from this list is 400. */
export async function listSessionPage(
  db: Db,
  accountId: string,
  page: { limit: number; cursor?: string | undefined; status: SessionListStatus; agentKeyId: string | null },
): Promise<{ sessions: SessionRow[]; nextCursor: string | null }> {
  const found = await listSessions(db, accountId, { limit: page.limit, after: page.cursor, status: page.status, agentKeyId: page.agentKeyId });
  if (!found)
    throw new PlatformError('validation_failed', 'cursor is not a nextCursor from this list', {
      hint: 'Omit cursor to start from the newest session.',
    });
  return found;
}

/** An approver completes human steps only, and not one assigned to another approver. */
export async function assertApproverMayComplete(db: Db, sessionId: string, step: CookbookStep, memberId: string | null): Promise<void> {
  if (step.kind !== 'human') {
    throw new PlatformError('approver_forbidden', 'Approvers complete human steps only', { hint: "The agent's key completes this step." });
  }
  const assignee = await findAssignee(db, sessionId, step.stepId);
  if (assignee && assignee.id !== memberId) {
    throw new PlatformError('step_assigned_elsewhere', `This step is assigned to ${assignee.email}`, {
      hint: 'Ask the account owner to reassign it if it should be yours.',
    });
  }
}

/** Assigns a waiting human step to one of the account's approvers (404 for another), or to nobody in particular (null). */
export async function assignStep(
  db: Db,
  accountId: string,
  sessionId: string,
  stepId: string,
  memberId: string | null,
): Promise<{ id: string; email: string } | null> {
  const member = memberId === null ? null : await findMember(db, accountId, memberId);
  if (memberId !== null && !member) throw notFound(`Approver ${memberId}`, "List the account's approvers with GET /api/v1/members.");
  await assignHumanStep(db, sessionId, stepId, member?.id ?? null);
  return member ? { id: member.id, email: member.email } : null;
}

export type { Cookbook, CookbookStep };
