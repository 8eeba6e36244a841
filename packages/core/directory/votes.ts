import { notFound } from '#core/platform';
import type { Db } from '#db/sql';
import { castVote, myVote, removeVote, tally, targetExists, type Tally, type VoteTarget } from '#db/votes';

export type { Tally, VoteTarget };

/** What a vote is about: an API or a cookbook of the directory. */
export interface VoteSubject {
  targetType: VoteTarget;
  targetId: string;
}

async function requireTarget(db: Db, { targetType, targetId }: VoteSubject): Promise<void> {
  if (!(await targetExists(db, targetType, targetId))) {
    throw notFound(
      `${targetType === 'api' ? 'API' : 'Cookbook'} ${targetId}`,
      targetType === 'api' ? 'GET /api/v1/apis lists API ids.' : 'GET /api/v1/cookbooks lists cookbook ids.',
    );
  }
}

/** Casts or changes the account's vote on an existing API or cookbook; answers the new tally. */
export async function voteOn(db: Db, accountId: string, subject: VoteSubject, value: 1 | -1): Promise<Tally> {
  await requireTarget(db, subject);
  await castVote(db, accountId, subject.targetType, subject.targetId, value);
  return tally(db, subject.targetType, subject.targetId);
}

/** Removes the account's vote; answers what it was (null: none) and the new tally. */
export async function withdrawVote(db: Db, accountId: string, subject: VoteSubject): Promise<{ removed: 1 | -1 | null; tally: Tally }> {
  await requireTarget(db, subject);
  const removed = await removeVote(db, accountId, subject.targetType, subject.targetId);
  return { removed, tally: await tally(db, subject.targetType, subject.targetId) };
}

/** The tally of an API or cookbook with the account's own vote. */
export async function voteTally(db: Db, accountId: string, subject: VoteSubject): Promise<Tally & { myVote: 1 | -1 | null }> {
  await requireTarget(db, subject);
  const [counts, mine] = await Promise.all([
    tally(db, subject.targetType, subject.targetId),
    myVote(db, accountId, subject.targetType, subject.targetId),
  ]);
  return { ...counts, myVote: mine };
}
