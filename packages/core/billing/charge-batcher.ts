import postgres from 'postgres';
import { assertBatchable, charge, chargeBatch, type ChargeRequest, type ChargeResult } from '#db/ledger';
import type { Sql } from '#db/sql';
import type { Logger } from '#core/platform';

export interface ChargeBatcherOptions {
  /** Most charges one statement carries; 1 turns batching off (every charge is its own statement). */
  maxBatch: number;
  /** Statements in flight at once; charges that arrive meanwhile wait for one of them to finish. */
  maxInFlight: number;
  log: Logger;
  /** Sees every settled charge (balance alerts); must return at once and never throw. */
  observe?: (req: ChargeRequest, result: ChargeResult) => void;
}

interface Pending {
  req: ChargeRequest;
  resolve(result: ChargeResult): void;
  reject(error: unknown): void;
}

/**
 * SQLSTATE classes and codes that mean Postgres refused the statement itself (so it charged nothing
 * and each charge may be retried alone): bad data (22), a constraint (23), a deadlock or
 * serialization failure (40001, 40P01), a statement timeout or cancel (57014). Anything else (the
 * connection or the server going away) leaves the outcome unknown, and nothing is retried.
 */
function refusedAsAWhole(error: unknown): boolean {
  if (!(error instanceof postgres.PostgresError)) return false;
  const code = error.code ?? '';
  return code.startsWith('22') || code.startsWith('23') || code === '40001' || code === '40P01' || code === '57014';
}

/**
 * Group commit for the charges of one edge: the charges that arrive while the event loop is busy, or
 * while `maxInFlight` statements are already running, leave together as one statement
 * (`chargeBatch`), so a busy edge pays one round trip and one commit for many calls instead of one
 * each. Every caller still waits for its own charge to be committed before it goes on; nothing is
 * answered from memory.
 *
 * Charges wait in one queue per account, in arrival order. A batch takes the oldest charge of each
 * waiting account that no statement in flight already holds, so an account is in at most one
 * statement at a time: a busy account's charges go one after another, each beside other accounts'
 * charges, and the statements of one edge never wait for each other's row locks. Spend-limited
 * agent keys keep their own transaction.
 *
 * When Postgres refuses a batch as a whole (see `refusedAsAWhole`), the statement charged nothing,
 * and each of its charges is retried on its own, so one bad charge fails alone. When the connection
 * fails instead, the outcome is unknown, so nothing is retried: those calls fail as a single charge would.
 */
export class ChargeBatcher {
  /** Waiting charges by account; the Map keeps accounts in the order their oldest charge arrived. */
  private waitingByAccount = new Map<string, Pending[]>();
  private waitingCount = 0;
  private readonly accountsInFlight = new Set<string>();
  private inFlight = 0;
  private scheduled = false;
  /** Counters since start: statements run, charges they carried, the largest batch, batches Postgres refused. */
  readonly stats = { statements: 0, charges: 0, largestBatch: 0, refusedBatches: 0 };

  constructor(
    private readonly sql: Sql,
    private readonly options: ChargeBatcherOptions,
  ) {}

  charge(req: ChargeRequest): Promise<ChargeResult> {
    const observe = this.options.observe;
    if (!observe) return this.settle(req);
    return this.settle(req).then((result) => {
      observe(req, result);
      return result;
    });
  }

  private settle(req: ChargeRequest): Promise<ChargeResult> {
    if (this.options.maxBatch <= 1 || (req.spendLimited && req.keyId)) return charge(this.sql, req);
    try {
      assertBatchable(req);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<ChargeResult>((resolve, reject) => {
      const account = req.accountId.toLowerCase();
      const queue = this.waitingByAccount.get(account);
      if (queue) queue.push({ req, resolve, reject });
      else this.waitingByAccount.set(account, [{ req, resolve, reject }]);
      this.waitingCount += 1;
      this.schedule();
    });
  }

  /** Charges waiting for a statement (not counting those in flight). */
  get waiting(): number {
    return this.waitingCount;
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight || this.waitingCount === 0) return;
    this.scheduled = true;
    // The next turn of the event loop: every charge made by the requests handled in this one joins.
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < this.options.maxInFlight) {
        const batch = this.take();
        // Everything waiting belongs to accounts already in flight: their statements' ends reschedule.
        if (batch.length === 0) return;
        this.inFlight += 1;
        void this.run(batch).finally(() => {
          this.inFlight -= 1;
          for (const pending of batch) this.accountsInFlight.delete(pending.req.accountId.toLowerCase());
          this.schedule();
        });
      }
    });
  }

  /** The oldest waiting charge of each account not in flight, oldest accounts first, up to `maxBatch`. */
  private take(): Pending[] {
    const batch: Pending[] = [];
    for (const [account, queue] of this.waitingByAccount) {
      if (batch.length >= this.options.maxBatch) break;
      if (this.accountsInFlight.has(account)) continue;
      batch.push(queue.shift()!);
      this.accountsInFlight.add(account);
      this.waitingCount -= 1;
      // Emptied: dropped. With charges left: moved behind the other accounts (round robin).
      this.waitingByAccount.delete(account);
      if (queue.length > 0) this.waitingByAccount.set(account, queue);
    }
    return batch;
  }

  private async run(batch: Pending[]): Promise<void> {
    this.stats.statements += 1;
    this.stats.charges += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    if (batch.length === 1) return settle(batch[0]!, charge(this.sql, batch[0]!.req));
    let results: Array<ChargeResult | null>;
    try {
      results = await chargeBatch(
        this.sql,
        batch.map((p) => p.req),
      );
    } catch (error) {
      if (!refusedAsAWhole(error)) {
        for (const pending of batch) pending.reject(error);
        return;
      }
      // Postgres refused the statement as a whole, so nothing of it was charged: one by one instead.
      this.stats.refusedBatches += 1;
      this.options.log.warn({ err: error, charges: batch.length }, 'charge batch refused; charging its calls one by one');
      await Promise.all(batch.map((pending) => settle(pending, charge(this.sql, pending.req))));
      return;
    }
    // An account that vanished (deleted meanwhile) fails on its own, with the single charge's error.
    await Promise.all(batch.map((pending, i) => (results[i] ? pending.resolve(results[i]) : settle(pending, charge(this.sql, pending.req)))));
  }
}

async function settle(pending: Pending, result: Promise<ChargeResult>): Promise<void> {
  try {
    pending.resolve(await result);
  } catch (error) {
    pending.reject(error);
  }
}
