import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { reserveCredit, settleHolds, type HeldCharge, type HoldSettled, type HoldSettlement } from '#db/credit-holds';
import { getBalance } from '#db/ledger';
import type { ChargeRequest, ChargeResult } from '#db/ledger';
import type { Sql } from '#db/sql';
import { timeOrderedUuid, type Logger } from '#core/platform';
import type { Queue } from 'bullmq';
import type { Charger } from './charging.js';
import { refundOrQueue, type RefundOutcome } from './refunds.js';

export interface CreditReservationOptions {
  /** Off: every charge goes to `fallback` (the synchronous group commit). */
  enabled: boolean;
  /** An account is served from a hold once it makes at least this many charged calls a second on this edge. */
  minCallsPerSecond: number;
  /** A hold is sized to this many seconds of the account's recent spend on this edge ... */
  sliceSeconds: number;
  /** ... and at least this much ... */
  floorMicros: bigint;
  /** ... and at most this much (also the most an edge that dies can keep out of reach until its hold expires). */
  ceilingMicros: bigint;
  /** How often the calls charged from holds are written to the ledger. */
  settleEveryMs: number;
  /** A hold not settled for this long is taken for dead and settled from its usage events (see settleExpiredHolds). */
  holdTtlSeconds: number;
  /** A hold with no call for this long is settled and closed (its rest returned). */
  idleMs: number;
  log: Logger;
  /** Sees every charge made from a hold (balance alerts); must return at once and never throw. */
  observe?: (req: ChargeRequest, result: ChargeResult) => void;
}

/** A charge made from a hold: the ledger row is written by the next settlement. */
export type HeldChargeResult = Extract<ChargeResult, { ok: true }> & { holdId: string };

interface Taken {
  holdId: string;
  charge: HeldCharge;
}

interface AccountState {
  accountId: string;
  holdId: string | null;
  /** Held and not yet spent by this edge. */
  remaining: bigint;
  /** Running total this edge gave back from the hold (settled as a total, so retries are harmless). */
  released: bigint;
  /** The part of `released` the ledger has (as of the last settlement of this hold). */
  releasedSettled: bigint;
  /** Spendable outside every hold, as of the last grant or settlement. */
  availableOutside: bigint;
  /** Calls charged from holds (each names its own), waiting for their ledger rows; `sending` is the batch in flight. */
  pending: Taken[];
  sending: Taken[];
  refill: Promise<boolean> | null;
  /** Calls and spend in the current and the previous one-second window. */
  windowStart: number;
  calls: number;
  spend: bigint;
  previousCalls: number;
  previousSpend: bigint;
  lastCall: number;
  closing: boolean;
  /** Orders this edge's grants, settlements, refunds and synchronous charges of the account (see BalanceGate). */
  gate: BalanceGate;
}

/**
 * Orders what changes an account's balance outside holds as this edge sees it (`availableOutside`).
 * Two kinds of work touch it:
 * - a snapshot (a grant, a refused grant, a settlement) replaces it with the value as of the
 *   statement's commit, and changes the edge's view of its hold to match (what was granted, what the
 *   ledger has of what was released). Snapshots run one at a time: two in flight at once can
 *   commit in one order and answer in the other (a settlement's answer waits for a statement after
 *   its commit), and the one applied last would then pair an older balance with a newer hold.
 *   A settlement that read the balance before a grant and was applied after it counted the grant
 *   twice: in the hold and in the balance outside it;
 * - a delta (a refund, a synchronous charge beside a hold) adds its own amount to the last snapshot.
 *   Deltas commute, so they run together; but a snapshot taken while one commits may or may not
 *   include it, so deltas and snapshots take turns: each snapshot either includes a delta or
 *   precedes it.
 * Work that arrives while other work waits queues behind it, so neither kind starves the other.
 */
class BalanceGate {
  private kind: 'delta' | 'snapshot' | null = null;
  private active = 0;
  private waiting: Array<{ kind: 'delta' | 'snapshot'; go: () => void }> = [];

  constructor(private readonly onWait: () => void) {}

  /** Nothing runs or waits (the account's state may be dropped). */
  get idle(): boolean {
    return this.active === 0 && this.waiting.length === 0;
  }

  /** Runs `work` in its turn; whatever it applies to the account's state, it applies before the next turn. */
  async run<T>(kind: 'delta' | 'snapshot', work: () => Promise<T>): Promise<T> {
    const joins = this.active === 0 || (kind === 'delta' && this.kind === 'delta' && this.waiting.length === 0);
    if (joins) {
      this.kind = kind;
      this.active += 1;
    } else {
      this.onWait();
      await new Promise<void>((go) => this.waiting.push({ kind, go }));
    }
    try {
      return await work();
    } finally {
      this.leave();
    }
  }

  /** Lets in the next turn: the first waiting snapshot alone, or every waiting delta. */
  private leave(): void {
    this.active -= 1;
    if (this.active > 0) return;
    this.kind = null;
    const next = this.waiting[0];
    if (!next) return;
    const admitted = next.kind === 'snapshot' ? [next] : this.waiting.filter((w) => w.kind === 'delta');
    this.waiting = this.waiting.filter((w) => !admitted.includes(w));
    this.kind = next.kind;
    this.active = admitted.length;
    for (const w of admitted) w.go();
  }
}

/** Runs `work` as one snapshot of every gate's account, entered one after another (a settlement holds several). */
function inGates<T>(gates: BalanceGate[], work: () => Promise<T>, from = 0): Promise<T> {
  const gate = gates[from];
  return gate ? gate.run('snapshot', () => inGates(gates, work, from + 1)) : work();
}

/**
 * Credit reservation, the way prepaid metering keeps per-call work off the database: for a busy
 * account the edge reserves a slice of its balance in one atomic statement (a credit hold, about a
 * second of the account's recent spend, between a floor and a ceiling), charges calls from it in
 * memory, and writes their ledger rows in batches every `settleEveryMs`, returning what it no longer
 * needs. A call is answered only once it is paid: from money already held (nothing can spend it
 * twice: see db/src/credit-holds.ts), or by the synchronous charge.
 *
 * - Quiet accounts (fewer than `minCallsPerSecond` calls a second here) and spend-limited agent keys
 *   keep the synchronous charge, so their balance and ledger are exact at every answer.
 * - When the hold cannot cover a call and the balance outside holds cannot refill it, the hold is
 *   settled and closed and the call goes to the synchronous charge: a 402 still means the balance is short.
 * - An edge that dies leaves its holds to expire; the refund reconciler then charges the calls its
 *   usage events name and returns the rest (settleExpiredHolds).
 * - The balance a held call reports (`X-Service-Balance`) is what the caller can still spend: the
 *   balance outside holds at the last settlement plus what this edge still holds for it.
 */
export class CreditReservations implements Charger {
  readonly edgeId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly accounts = new Map<string, AccountState>();
  private timer: NodeJS.Timeout | null = null;
  private settling: Promise<void> | null = null;
  private closed = false;
  private lastSettled = 0;
  /** Counters since start: calls charged from holds, grants, refused refills, settlements, ledger rows written. */
  readonly stats = {
    held: 0,
    fallback: 0,
    grants: 0,
    refusedRefills: 0,
    settlements: 0,
    rowsWritten: 0,
    unpaid: 0,
    failedSettlements: 0,
    /** Grants, settlements, refunds and synchronous charges that waited for another's turn on their account (see BalanceGate). */
    balanceWaits: 0,
  };

  /** Holds this edge has open now (metrics). */
  openHolds(): number {
    let open = 0;
    for (const state of this.accounts.values()) if (state.holdId !== null) open += 1;
    return open;
  }

  constructor(
    private readonly sql: Sql,
    private readonly fallback: Charger,
    private readonly options: CreditReservationOptions,
  ) {
    if (options.enabled) {
      this.timer = setInterval(() => void this.settle(), options.settleEveryMs);
      this.timer.unref();
    }
  }

  charge(req: ChargeRequest): Promise<ChargeResult> {
    if (!this.options.enabled || this.closed || req.costMicros <= 0n) return this.fallback.charge(req);
    if (req.spendLimited && req.keyId) return this.chargeBeside(req);
    const state = this.stateOf(req.accountId);
    const now = Date.now();
    this.count(state, req.costMicros, now);
    if (state.holdId === null && Math.max(state.calls, state.previousCalls) < this.options.minCallsPerSecond) {
      this.stats.fallback += 1;
      return this.chargeBeside(req);
    }
    const taken = this.take(state, req, now);
    if (taken) return Promise.resolve(taken);
    return this.chargeAfterRefill(state, req);
  }

  /**
   * Returns a call's charge (refundOrQueue: now, or through `queue` when Postgres refuses it now).
   * A charge made from a hold gets its ledger row first, since a refund returns a recorded charge:
   * the edge refunds through here so that order holds everywhere. The balance it reports is what
   * the caller can spend (see `spendable`), so the next answer's X-Service-Balance follows from it.
   */
  async refund(
    chargeId: string,
    reason: string,
    queue: Queue,
    log: { error(object: Record<string, unknown>, message: string): void },
    /** The charge's account: orders the refund against this edge's balance snapshots of it. */
    accountId: string,
  ): Promise<RefundOutcome> {
    if (!this.options.enabled) return refundOrQueue(this.sql, queue, chargeId, reason, log);
    await this.recorded(chargeId);
    const state = this.stateOf(accountId);
    return state.gate.run('delta', async () => {
      const outcome = await refundOrQueue(this.sql, queue, chargeId, reason, log);
      if (!outcome.refunded || outcome.accountId.toLowerCase() !== state.accountId || state.holdId === null) return outcome;
      // Refunded money lands outside every hold; without this the next held call would report one refund too little.
      if (outcome.created) state.availableOutside += outcome.amountMicros;
      return { ...outcome, balanceMicros: this.spendable(state) };
    });
  }

  /**
   * What the caller can still spend, as this edge sees it: exact on a single edge (other edges' calls
   * not yet settled are not seen; see docs/API.md on X-Service-Balance).
   */
  async balanceOf(accountId: string): Promise<bigint> {
    const state = this.accounts.get(accountId.toLowerCase());
    if (state && state.holdId !== null) return this.spendable(state);
    return (await getBalance(this.sql, accountId)) ?? 0n;
  }

  /**
   * The ledger's balance less the calls charged from holds that it does not have yet: the balance
   * outside holds, plus what this edge still holds, plus what it released and has not yet settled.
   */
  private spendable(state: AccountState): bigint {
    return state.availableOutside + state.remaining + (state.released - state.releasedSettled);
  }

  /**
   * A charge that does not come from a hold (a quiet account, a spend-limited agent key, a call the
   * hold could not cover): the synchronous charge. When this edge holds money for the account, the
   * charge's own answer counts what edges hold as spent, so the balance it reports is what the
   * caller can spend: the last snapshot less this charge (a delta, so charges run side by side).
   */
  private chargeBeside(req: ChargeRequest): Promise<ChargeResult> {
    const state = this.stateOf(req.accountId);
    return state.gate.run('delta', async () => {
      const result = await this.fallback.charge(req);
      if (!result.ok || state.holdId === null) return result;
      state.availableOutside -= result.costMicros;
      return { ...result, balanceMicros: this.spendable(state) };
    });
  }

  /** Resolves once the call charged `chargeId` (if it was charged from a hold) has its ledger row. */
  async recorded(chargeId: string): Promise<void> {
    for (const state of this.accounts.values()) {
      const waiting = (list: Taken[]) => list.some((t) => t.charge.id === chargeId);
      if (waiting(state.pending) || waiting(state.sending)) {
        await this.settle();
        if (waiting(state.pending)) await this.settle();
        return;
      }
    }
  }

  /** Waits for grants in flight, then writes everything charged from holds (tests, shutdown). */
  async flush(): Promise<void> {
    await this.grantsInFlight();
    await this.settle();
  }

  /** Resolves when no grant is in flight. */
  async grantsInFlight(): Promise<void> {
    await Promise.all([...this.accounts.values()].map((state) => state.refill));
  }

  /** Settles every hold and returns what it kept (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    // A grant that lands after the last settlement would stay held until its hold expired.
    await this.grantsInFlight();
    for (const state of this.accounts.values()) state.closing = true;
    await this.settle();
    // A settlement that failed keeps its holds open; they expire and the reconciler settles them.
  }

  /** Stops without settling: what a crashed edge leaves behind (tests of the recovery). */
  abandon(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.accounts.clear();
  }

  private stateOf(accountId: string): AccountState {
    const key = accountId.toLowerCase();
    let state = this.accounts.get(key);
    if (!state) {
      state = {
        accountId: key,
        holdId: null,
        remaining: 0n,
        released: 0n,
        releasedSettled: 0n,
        availableOutside: 0n,
        pending: [],
        sending: [],
        refill: null,
        windowStart: Date.now(),
        calls: 0,
        spend: 0n,
        previousCalls: 0,
        previousSpend: 0n,
        lastCall: Date.now(),
        closing: false,
        gate: new BalanceGate(() => {
          this.stats.balanceWaits += 1;
        }),
      };
      this.accounts.set(key, state);
    }
    return state;
  }

  private count(state: AccountState, cost: bigint, now: number): void {
    if (now - state.windowStart >= 1_000) {
      const gap = now - state.windowStart >= 2_000;
      state.previousCalls = gap ? 0 : state.calls;
      state.previousSpend = gap ? 0n : state.spend;
      state.calls = 0;
      state.spend = 0n;
      state.windowStart = now;
    }
    state.calls += 1;
    state.spend += cost;
    state.lastCall = now;
  }

  /** The slice to hold: about `sliceSeconds` of the account's recent spend, within the floor and the ceiling. */
  private target(state: AccountState, cost: bigint): bigint {
    const recent = state.spend > state.previousSpend ? state.spend : state.previousSpend;
    let want = (recent * BigInt(Math.round(this.options.sliceSeconds * 1000))) / 1000n;
    if (want < this.options.floorMicros) want = this.options.floorMicros;
    if (want > this.options.ceilingMicros) want = this.options.ceilingMicros;
    return want < cost ? cost : want;
  }

  private take(state: AccountState, req: ChargeRequest, now: number): HeldChargeResult | null {
    if (state.holdId === null || state.closing || state.remaining < req.costMicros) return null;
    state.remaining -= req.costMicros;
    const charge: HeldCharge = {
      id: timeOrderedUuid(),
      costMicros: req.costMicros,
      keyId: req.keyId ?? null,
      apiId: req.apiId ?? null,
      item: req.item,
      description: req.description ?? null,
      at: new Date(now),
    };
    state.pending.push({ holdId: state.holdId, charge });
    this.stats.held += 1;
    // Refilled ahead of need, so steady traffic never waits for a grant.
    if (state.refill === null && state.remaining * 2n < this.target(state, req.costMicros)) void this.refill(state, req.costMicros, 0n);
    const result: HeldChargeResult = {
      ok: true,
      chargeId: charge.id,
      balanceMicros: this.spendable(state),
      costMicros: req.costMicros,
      holdId: state.holdId,
    };
    this.options.observe?.(req, result);
    return result;
  }

  private async chargeAfterRefill(state: AccountState, req: ChargeRequest): Promise<ChargeResult> {
    // One grant at a time per account; the calls that waited for it try the hold again.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const granted = await (state.refill ?? this.refill(state, req.costMicros, req.costMicros - state.remaining));
      const taken = this.take(state, req, Date.now());
      if (taken) return taken;
      if (!granted) break;
    }
    // The balance outside holds cannot cover the call: the hold is settled and closed (its rest goes
    // back), and the synchronous charge decides, against the whole spendable balance.
    if (state.holdId !== null && !state.closing) {
      state.closing = true;
      await this.settle().catch(() => {});
    }
    this.stats.fallback += 1;
    return this.chargeBeside(req);
  }

  /** Asks Postgres for more of the account's balance; true when something was granted. */
  private refill(state: AccountState, cost: bigint, need: bigint): Promise<boolean> {
    const want = this.target(state, cost);
    const needed = need > 0n ? need : cost;
    const run = (async () => {
      try {
        // A hold being closed is never refilled: its settlement finishes first and a new one opens.
        if (state.closing) await this.settle();
        return await state.gate.run('snapshot', async () => {
          const result = await reserveCredit(this.sql, {
            accountId: state.accountId,
            edgeId: this.edgeId,
            holdId: state.holdId,
            wantMicros: want < needed ? needed : want,
            needMicros: needed,
            ttlSeconds: this.options.holdTtlSeconds,
          });
          if (!result.ok) {
            this.stats.refusedRefills += 1;
            state.availableOutside = result.availableMicros;
            return false;
          }
          this.stats.grants += 1;
          if (result.holdId !== state.holdId) {
            // A new hold (the first, or the old one was closed under us): nothing of the old one is ours any more.
            state.holdId = result.holdId;
            state.remaining = 0n;
            state.released = 0n;
            state.releasedSettled = 0n;
          }
          state.remaining += result.grantedMicros;
          state.availableOutside = result.availableMicros;
          state.closing = false;
          return true;
        });
      } catch (error) {
        this.options.log.warn({ err: error, accountId: state.accountId }, 'credit hold could not be refilled; charging synchronously');
        return false;
      } finally {
        state.refill = null;
      }
    })();
    state.refill = run;
    return run;
  }

  /** One settlement at a time; a caller that arrives while one runs waits for it and then runs its own. */
  private async settle(): Promise<void> {
    while (this.settling) await this.settling;
    this.settling = this.settleOnce().finally(() => {
      this.settling = null;
    });
    return this.settling;
  }

  private async settleOnce(): Promise<void> {
    const now = Date.now();
    const items: Array<{ state: AccountState; item: HoldSettlement; current: boolean }> = [];
    for (const state of this.accounts.values()) {
      if (state.holdId === null && state.pending.length === 0) {
        // Not while a refund or a charge of it is under way: its gate must stay the account's only one.
        if (now - state.lastCall > this.options.idleMs && state.refill === null && state.gate.idle) this.accounts.delete(state.accountId);
        continue;
      }
      const current = state.holdId;
      const idle = now - state.lastCall > this.options.idleMs;
      const close = current !== null && (state.closing || idle);
      // More held than the slice needs (traffic slowed): the surplus goes back.
      const target = this.target(state, 1n);
      if (current !== null && !close && state.remaining > 2n * target) {
        state.released += state.remaining - target;
        state.remaining = target;
      }
      if (current !== null && !close && state.pending.length === 0 && state.released === 0n) continue;
      state.sending = state.pending;
      state.pending = [];
      if (close) state.closing = true;
      // Calls taken from an earlier hold (closed under this edge) go with that hold's id.
      const byHold = new Map<string, HeldCharge[]>();
      for (const taken of state.sending) {
        const list = byHold.get(taken.holdId);
        if (list) list.push(taken.charge);
        else byHold.set(taken.holdId, [taken.charge]);
      }
      for (const [holdId, charges] of byHold) {
        if (holdId !== current)
          items.push({ state, current: false, item: { holdId, accountId: state.accountId, charges, releasedMicros: 0n, close: false } });
      }
      if (current !== null) {
        items.push({
          state,
          current: true,
          item: { holdId: current, accountId: state.accountId, charges: byHold.get(current) ?? [], releasedMicros: state.released, close },
        });
      }
    }
    // Open holds are kept alive (their expiry pushed forward) at least every third of their lifetime.
    const keepAlive = this.hasHolds() && now - this.lastSettled > (this.options.holdTtlSeconds * 1000) / 3;
    if (items.length === 0 && !keepAlive) return;
    this.stats.settlements += 1;
    // The answer is applied before the accounts' gates let the next grant in (see BalanceGate).
    const gates = [...new Set(items.map((i) => i.state.gate))];
    await inGates(gates, async () => {
      let results: HoldSettled[];
      try {
        results = await settleHolds(
          this.sql,
          this.edgeId,
          items.map((i) => i.item),
          this.options.holdTtlSeconds,
        );
      } catch (error) {
        // Nothing was written: the calls wait for the next settlement (their ids make the retry exact).
        for (const state of new Set(items.map((i) => i.state))) {
          state.pending = [...state.sending, ...state.pending];
          state.sending = [];
        }
        this.stats.failedSettlements += 1;
        this.options.log.warn({ err: error, holds: items.length }, 'credit holds could not be settled; retrying');
        return;
      }
      this.lastSettled = now;
      results.forEach((result, i) => this.applySettled(items[i]!, result));
    });
  }

  private applySettled({ state, item, current }: { state: AccountState; item: HoldSettlement; current: boolean }, result: HoldSettled): void {
    this.stats.rowsWritten += item.charges.length - result.unpaid.length;
    state.sending = [];
    state.availableOutside = result.availableMicros;
    if (current && state.holdId === item.holdId && result.open) state.releasedSettled = item.releasedMicros;
    if (result.unpaid.length > 0) {
      this.stats.unpaid += result.unpaid.length;
      this.options.log.error(
        { accountId: state.accountId, holdId: item.holdId, calls: result.unpaid.length },
        'calls charged from a hold closed under this edge could not be paid from the balance',
      );
    }
    // Closed (by this settlement, or under the edge): whatever was left went back.
    if (current && (!result.open || item.close) && state.holdId === item.holdId) {
      state.holdId = null;
      state.remaining = 0n;
      state.released = 0n;
      state.releasedSettled = 0n;
      state.closing = false;
    }
  }

  private hasHolds(): boolean {
    for (const state of this.accounts.values()) if (state.holdId !== null) return true;
    return false;
  }
}
