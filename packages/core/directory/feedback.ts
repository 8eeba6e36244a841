/**
 * Discovery's feedback signal (issue 35; docs/decisions/discovery-feedback.md): an API that accounts
 * use, and above all one they called after discovery listed it to them, ranks a little higher among
 * the candidates of a task. The edge notes what each discovery listed to an account
 * (DiscoveryListings); the index reads per API how many accounts used it (`discoveryFeedback`) and
 * turns that into a signal in [0, 1] (`feedbackSignal`), which discovery weighs FEEDBACK_WEIGHT
 * (catalog.ts).
 */
import { recordDiscoveryListings, type DiscoveryListing } from '#db/discovery-feedback';
import type { Db } from '#db/sql';

/** The window the signal counts accounts over (and the listings are kept for). */
export const FEEDBACK_WINDOW_DAYS = 30;
/** Engaged accounts at which the signal reaches 1: it grows with the logarithm of their number up to this. */
export const FEEDBACK_SATURATION = 1000;

/**
 * An API's signal from its engaged accounts: `used` (called it, or hold a connection to it) plus
 * `followed` (called it the day discovery listed it to them or the day after), so that an account
 * that came through discovery counts twice. 0 for none, ln(1 + n) / ln(1 + FEEDBACK_SATURATION)
 * above, at most 1: the first accounts move it most, and no crowd makes it dominate.
 */
export function feedbackSignal(used: number, followed: number): number {
  const engaged = used + followed;
  if (!(engaged > 0)) return 0;
  return Math.min(1, Math.log1p(engaged) / Math.log1p(FEEDBACK_SATURATION));
}

/** The ids of the APIs a discovery answer (answers.ts, `discoverAnswer`'s bytes) lists, best first. */
export function listedApiIds(answer: Buffer | string): string[] {
  const text = typeof answer === 'string' ? answer : answer.toString('latin1');
  const ids: string[] = [];
  // Each result opens with {"api":{"id":"…" (writeSummary's first field): ids are plain catalog ids.
  for (const match of text.matchAll(/\{"api":\{"id":"([^"\\]{1,200})"/g)) ids.push(match[1]!);
  return ids;
}

export interface DiscoveryListingsOptions {
  log?: { warn: (object: object, message: string) => void };
  /** How often the notes are written, in one statement. */
  flushMs?: number;
  /** Notes held at most while the database is slow or away; past it new ones are dropped (and counted). */
  maxPending?: number;
}

/**
 * Notes what discovery listed to an account, written in batches off the request's path: a lost note
 * costs the ranking one account's feedback, never an answer, so a failed write is dropped with a
 * warning instead of retried.
 */
export class DiscoveryListings {
  private pending: DiscoveryListing[] = [];
  /** The listings pending, by account and ids: an agent asking the same task again in a batch's time is noted once. */
  private readonly seen = new Set<string>();
  private dropped = 0;
  private writing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly maxPending: number;

  constructor(
    private readonly db: Db,
    private readonly options: DiscoveryListingsOptions = {},
  ) {
    this.maxPending = options.maxPending ?? 10_000;
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 2_000);
    this.timer.unref();
  }

  note(accountId: string, apiIds: readonly string[]): void {
    if (apiIds.length === 0) return;
    const key = `${accountId} ${apiIds.join(' ')}`;
    if (this.seen.has(key)) return;
    if (this.pending.length >= this.maxPending) {
      this.dropped += 1;
      return;
    }
    this.seen.add(key);
    this.pending.push({ accountId, at: new Date(), apiIds: [...apiIds] });
  }

  /** Writes what is noted (waiting for a write already under way first). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.seen.clear();
    const dropped = this.dropped;
    this.dropped = 0;
    this.writing = recordDiscoveryListings(this.db, batch).then(
      () => {
        if (dropped > 0) this.options.log?.warn({ dropped }, 'discovery listings: notes dropped while the database was behind');
      },
      (error: unknown) => {
        this.options.log?.warn(
          { err: error, listings: batch.length + dropped },
          'discovery listings not recorded; the ranking misses their feedback',
        );
      },
    );
    try {
      await this.writing;
    } finally {
      this.writing = null;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
