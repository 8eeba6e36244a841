import postgres from 'postgres';
import type { FastifyBaseLogger } from 'fastify';
import { charge, chargeBatch, type ChargeRequest, type ChargeResult } from '../../../../db/src/ledger.js';
import type { Sql } from '../../../../db/src/sql.js';

export interface ChargeBatcherOptions {
  /** Most charges one statement carries; 1 turns batching off (every charge is its own statement). */
  maxBatch: number;
  /** Statements in flight at once; charges that arrive meanwhile wait for one of them to finish. */
  maxInFlight: number;
  log: FastifyBaseLogger;
}

interface Pending {
  req: ChargeRequest;
  resolve(result: ChargeResult): void;
  reject(error: unknown): void;
}

/**
 * Group commit for the charges of one edge: the charges that arrive while the event loop is busy, or
 * while `maxInFlight` statements are already running, leave together as one statement
 * (`chargeBatch`), so a busy edge pays one round trip and one commit for many calls instead of one
 * each. Every caller still waits for its own charge to be committed before it goes on; nothing is
 * answered from memory. A batch holds each account once (a second charge of the same account waits
 * for the next batch, in arrival order). Spend-limited agent keys keep their own transaction.
 *
 * When Postgres refuses a batch (a deadlock, a constraint), the statement charged nothing, and each of
 * its charges is retried on its own. When the connection fails instead, the outcome is unknown, so
 * nothing is retried: those calls fail as a single charge would.
 */
export class ChargeBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Counters since start: statements run, charges they carried, the largest batch, batches Postgres refused. */
  readonly stats = { statements: 0, charges: 0, largestBatch: 0, refusedBatches: 0 };

  constructor(
    private readonly sql: Sql,
    private readonly options: ChargeBatcherOptions,
  ) {}

  charge(req: ChargeRequest): Promise<ChargeResult> {
    if (this.options.maxBatch <= 1 || (req.spendLimited && req.keyId)) return charge(this.sql, req);
    return new Promise<ChargeResult>((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      this.schedule();
    });
  }

  /** Charges waiting for a statement (not counting those in flight). */
  get waiting(): number {
    return this.queue.length;
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    // The next turn of the event loop: every charge made by the requests handled in this one joins.
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < this.options.maxInFlight && this.queue.length > 0) {
        const batch = this.take();
        this.inFlight += 1;
        void this.run(batch).finally(() => {
          this.inFlight -= 1;
          this.schedule();
        });
      }
    });
  }

  /** The oldest waiting charges, each account at most once; the rest keep their order. */
  private take(): Pending[] {
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const accounts = new Set<string>();
    for (const pending of this.queue) {
      if (batch.length < this.options.maxBatch && !accounts.has(pending.req.accountId)) {
        accounts.add(pending.req.accountId);
        batch.push(pending);
      } else {
        rest.push(pending);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async run(batch: Pending[]): Promise<void> {
    this.stats.statements += 1;
    this.stats.charges += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    if (batch.length === 1) return settle(batch[0]!, charge(this.sql, batch[0]!.req));
    let results: Array<ChargeResult | null>;
    try {
      results = await chargeBatch(this.sql, batch.map((p) => p.req));
    } catch (error) {
      if (!(error instanceof postgres.PostgresError)) {
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
