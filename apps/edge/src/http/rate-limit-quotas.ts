import type { Redis } from 'ioredis';

// Fixed windows, many counters in one call: each counter grows by its amount, the increment that
// creates a window sets its expiry, and each returns the window's count after it and the time left
// (ms). KEYS are the counters; ARGV[i] is the window (ms) of KEYS[i] and ARGV[#KEYS + i] its amount.
const CLAIMS = `
local n = #KEYS
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[i])
  local amount = tonumber(ARGV[n + i])
  local count = redis.call('INCRBY', key, amount)
  if count == amount then redis.call('PEXPIRE', key, window) end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  out[#out + 1] = count
  out[#out + 1] = ttl
end
return out`;

export type LimiterRedis = Redis & { rateLimitClaims(numberOfKeys: number, ...keysThenArgs: Array<string | number>): Promise<number[]> };

/** Most counters one script call updates; a larger backlog goes out in several calls. */
const MAX_CLAIMS_PER_CALL = 512;

/** The limiter's counters since start. */
export interface LimiterStats {
  /** Redis script calls made. */
  calls: number;
  /** Counter increments those calls carried: one per exact hit, one per block of tokens claimed. */
  claims: number;
  /** Hits counted, however they were answered. */
  hits: number;
  /** Hits answered by the edge alone, without waiting on Redis: from its own tokens, or refused because the window's budget is all claimed. */
  local: number;
}

/** One increment of one counter, sent by HitBatcher. */
export interface Claim {
  readonly key: string;
  readonly windowMs: number;
  /** How much to add: read when the call leaves, so the hits that arrive before then join the claim. */
  amount(now: number): number;
  /** The window's count after the increment, and the time left in it as Redis measured it, some time after `sentAt`. */
  landed(count: number, ttlMs: number, amount: number, sentAt: number): void;
  failed(error: unknown): void;
}

/**
 * Sends counter increments to Redis, many per round trip: the claims made while the event loop is
 * busy (every request that arrived in the same turn) leave together in one script call on the next
 * turn, so a busy edge makes one Redis write for many requests instead of one each.
 */
export class HitBatcher {
  private pending: Claim[] = [];
  private scheduled = false;

  constructor(
    private readonly redis: LimiterRedis,
    private readonly stats: LimiterStats,
  ) {
    if (typeof redis.rateLimitClaims !== 'function') redis.defineCommand('rateLimitClaims', { lua: CLAIMS });
  }

  /** Adds one to `key`'s window and answers its count after the hit and the time left (ms). */
  hit(key: string, windowMs: number): Promise<[count: number, ttlMs: number]> {
    return new Promise((resolve, reject) => {
      this.claim({ key, windowMs, amount: () => 1, landed: (count, ttlMs) => resolve([count, ttlMs]), failed: reject });
    });
  }

  claim(claim: Claim): void {
    this.pending.push(claim);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_CLAIMS_PER_CALL);
      // Taken before the call is written: Redis runs it later, so a window's end computed from this
      // instant and the TTL it answers is never later than the window's real end.
      const sentAt = performance.now();
      const amounts = batch.map((claim) => claim.amount(sentAt));
      this.stats.calls += 1;
      this.stats.claims += batch.length;
      this.redis.rateLimitClaims(batch.length, ...batch.map((c) => c.key), ...batch.map((c) => c.windowMs), ...amounts).then(
        (out) => {
          if (!Array.isArray(out) || out.length !== 2 * batch.length) {
            const error = new Error('unexpected rate-limit script reply');
            batch.forEach((claim) => claim.failed(error));
            return;
          }
          batch.forEach((claim, i) => claim.landed(Number(out[2 * i]), Number(out[2 * i + 1]), amounts[i]!, sentAt));
        },
        (error: unknown) => batch.forEach((claim) => claim.failed(error)),
      );
    }
  }
}

/** What one hit came to. `resetMs` is the time left in the window. */
export type Counted =
  | { readonly outcome: 'admitted'; readonly remaining: number; readonly resetMs: number }
  | { readonly outcome: 'refused'; readonly resetMs: number }
  | { readonly outcome: 'unavailable'; readonly error: unknown };

export interface QuotaLimit {
  max: number;
  windowMs: number;
  /** Most tokens an edge holds unspent (claimed from Redis ahead of its hits); 1 claims each hit alone. */
  blockMax: number;
}

/** A block covers about this long of the subject's recent hits on this edge. */
const LEAD_MS = 150;
/** The subject's rate is measured over the current and the previous bucket of this length. */
const RATE_BUCKET_MS = 1000;
/** How often quotas with nothing worth keeping are dropped. */
const SWEEP_MS = 5000;

/**
 * One subject's budget on this edge: tokens claimed from the shared Redis counter and spent here.
 *
 * A hit spends a local token when there is one and goes on at once; once half a block is spent, the
 * next claim tops the tokens up to a block in the background, so steady traffic never waits. A hit
 * that finds no token waits for a claim, which covers every hit waiting when it leaves, or a block
 * if that is more. A claim is granted only what is left of the window's `max` in Redis, so all
 * edges together never admit more than `max` in a window; an edge holds at most `blockMax` tokens
 * unspent. The block is the subject's recent rate on this edge times LEAD_MS,
 * between 1 and `blockMax`; at 1 nothing is claimed ahead and every hit is counted in Redis before
 * it goes on. Tokens die with the window they were claimed in: its end is the TTL Redis answered,
 * counted from before the call left, so it is never later than the Redis key's.
 */
class LocalQuota implements Claim {
  /** Tokens Redis granted this edge in the current window and not yet spent. */
  private tokens = 0;
  /** The window's count in Redis after this edge's latest claim: every edge's claims, spent or not. */
  private claimed = 0;
  /** performance.now() at which the current window ends at the latest; 0 before the first claim. */
  private endsAt = 0;
  /** The window's whole budget is claimed: hits without a token are refused until `endsAt` without asking Redis. */
  private exhausted = false;
  /** A claim is queued or in flight; there is one at a time. */
  private claiming = false;
  /** Hits waiting for the claim in flight (there are none while tokens are left). */
  private readonly waiting: Array<(counted: Counted) => void> = [];
  /** The subject's hits on this edge in the current rate bucket and in the one before it. */
  private bucketStart = -Infinity;
  private current = 0;
  private previous = 0;
  /** The previous bucket was observed whole (the subject has been seen for over a bucket without a pause). */
  private warm = false;
  private lastHitAt = 0;

  constructor(
    readonly key: string,
    private readonly limit: QuotaLimit,
    private readonly batcher: HitBatcher,
    private readonly stats: LimiterStats,
  ) {}

  get windowMs(): number {
    return this.limit.windowMs;
  }

  take(now: number): Counted | Promise<Counted> {
    this.countHit(now);
    if (now >= this.endsAt) this.expire();
    if (this.tokens > 0) {
      this.stats.local += 1;
      const counted = this.spend(now);
      this.claimAhead(now);
      return counted;
    }
    if (this.exhausted) {
      this.stats.local += 1;
      return { outcome: 'refused', resetMs: this.endsAt - now };
    }
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.claim();
    });
  }

  amount(now: number): number {
    if (now >= this.endsAt) this.expire();
    return Math.max(1, this.waiting.length, this.blockSize(now) - this.tokens);
  }

  landed(count: number, ttlMs: number, amount: number, sentAt: number): void {
    this.claiming = false;
    const now = performance.now();
    if (now >= this.endsAt) this.expire();
    const endsAt = sentAt + ttlMs;
    // A grant whose window ended on its way back is worth nothing; the waiting hits claim again.
    if (endsAt > now) {
      // While this edge's window has not ended, the claim ran in it (its Redis key outlives endsAt).
      this.endsAt = this.endsAt > now ? Math.min(this.endsAt, endsAt) : endsAt;
      this.claimed = Math.max(this.claimed, count);
      const granted = Math.max(0, Math.min(amount, this.limit.max - (count - amount)));
      this.tokens += granted;
      if (granted < amount) this.exhausted = true;
    }
    const served = Math.min(this.tokens, this.waiting.length);
    for (let i = 0; i < served; i++) this.waiting[i]!(this.spend(now));
    this.waiting.splice(0, served);
    if (this.waiting.length === 0) {
      this.claimAhead(now);
    } else if (this.exhausted) {
      const refused: Counted = { outcome: 'refused', resetMs: this.endsAt - now };
      for (const resolve of this.waiting.splice(0)) resolve(refused);
    } else {
      // Hits that arrived after the call left, or a grant that came too late.
      this.claim();
    }
  }

  failed(error: unknown): void {
    this.claiming = false;
    const unavailable: Counted = { outcome: 'unavailable', error };
    for (const resolve of this.waiting.splice(0)) resolve(unavailable);
  }

  /** Nothing here that a fresh quota would not rebuild: no tokens or refusal to keep, no claim, quiet for a while. */
  disposable(now: number): boolean {
    const holds = (this.tokens > 0 || this.exhausted) && now < this.endsAt;
    return !holds && !this.claiming && now - this.lastHitAt >= 2 * RATE_BUCKET_MS;
  }

  private spend(now: number): Counted {
    this.tokens -= 1;
    // What this edge knows is left: the budget no edge had claimed at its latest claim, plus the
    // tokens it still holds. Tokens other edges hold unspent count as used. Alone, an edge answers
    // max - 1 down to 0 over a window, one value per admitted hit, as an exact counter would.
    const remaining = this.limit.max - Math.min(this.claimed, this.limit.max) + this.tokens;
    return { outcome: 'admitted', remaining, resetMs: this.endsAt - now };
  }

  private claim(): void {
    if (this.claiming) return;
    this.claiming = true;
    this.batcher.claim(this);
  }

  /** Claims the next block once half of the current one is spent. */
  private claimAhead(now: number): void {
    if (this.claiming || this.exhausted) return;
    const block = this.blockSize(now);
    if (block >= 2 && this.tokens * 2 <= block) this.claim();
  }

  private expire(): void {
    this.tokens = 0;
    this.claimed = 0;
    this.exhausted = false;
  }

  private countHit(now: number): void {
    const elapsed = now - this.bucketStart;
    if (elapsed >= RATE_BUCKET_MS) {
      this.warm = elapsed < 2 * RATE_BUCKET_MS;
      this.previous = this.warm ? this.current : 0;
      this.bucketStart = this.warm ? this.bucketStart + RATE_BUCKET_MS : now;
      this.current = 0;
    }
    this.current += 1;
    this.lastHitAt = now;
  }

  /**
   * The subject's hits in about LEAD_MS at its recent rate, between 1 and blockMax: its rate over the
   * last second, or, in its first second after a pause, over the time since (at least LEAD_MS), so a
   * burst reaches full blocks within LEAD_MS instead of a second.
   */
  private blockSize(now: number): number {
    const into = now - this.bucketStart;
    const perMs = this.warm
      ? (this.previous * Math.max(0, 1 - into / RATE_BUCKET_MS) + this.current) / RATE_BUCKET_MS
      : this.current / Math.max(LEAD_MS, into);
    return Math.min(this.limit.blockMax, Math.max(1, Math.round(perMs * LEAD_MS)));
  }
}

/**
 * The limiter's counters: exact hits (each counted in Redis before it goes on) and local quotas
 * (see LocalQuota), sharing one HitBatcher.
 */
export class RateCounters {
  readonly stats: LimiterStats = { calls: 0, claims: 0, hits: 0, local: 0 };
  private readonly batcher: HitBatcher;
  private readonly quotas = new Map<string, LocalQuota>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(redis: LimiterRedis) {
    this.batcher = new HitBatcher(redis, this.stats);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** One hit counted in Redis before the answer; a Redis failure is answered `unavailable`. */
  exact(key: string, limit: QuotaLimit): Promise<Counted> {
    this.stats.hits += 1;
    return this.batcher.hit(key, limit.windowMs).then(
      ([count, ttlMs]): Counted =>
        count > limit.max ? { outcome: 'refused', resetMs: ttlMs } : { outcome: 'admitted', remaining: limit.max - count, resetMs: ttlMs },
      (error: unknown): Counted => ({ outcome: 'unavailable', error }),
    );
  }

  /** One hit spent from this edge's tokens when it holds some (answered at once), else after a claim. */
  local(key: string, limit: QuotaLimit): Counted | Promise<Counted> {
    this.stats.hits += 1;
    let quota = this.quotas.get(key);
    if (quota === undefined) {
      quota = new LocalQuota(key, limit, this.batcher, this.stats);
      this.quotas.set(key, quota);
    }
    return quota.take(performance.now());
  }

  /** Subjects with a quota on this edge. */
  get subjects(): number {
    return this.quotas.size;
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = performance.now();
    for (const [key, quota] of this.quotas) if (quota.disposable(now)) this.quotas.delete(key);
  }
}
