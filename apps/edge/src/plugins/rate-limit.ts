import { isIPv6 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';
import { PlatformError } from '#core/platform';
import type { EdgeSettings } from '../config.js';

/**
 * Route-level rate-limit policy, declared in `config.rateLimit`: 'login' and 'register' are strict
 * per-address limits; `false` exempts the route (health probes). Unset, a route under /api/ is
 * limited per key (or per account for the dashboard cookie) when the caller authenticated, and per
 * client address otherwise.
 */
export type RateLimitPolicy = 'login' | 'register' | false;

export type RateLimitBucket = 'key' | 'account' | 'public' | 'login' | 'register';

export interface RateLimiter {
  /**
   * Counts one hit of `subject` under `policy`, sets the limit headers on the reply, and throws 429
   * `rate_limited` when the window's budget is spent. Lets the request through when Redis is down.
   */
  consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string): Promise<void>;
  /**
   * Counts one hit of an authenticated request against its key's and its account's budgets, as
   * every limited route under /api/ does (used by routes outside /api/, such as /mcp).
   */
  consumeCaller(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** Redis script calls made and the hits they carried (many hits share a call on a busy edge). */
  readonly stats: { calls: number; hits: number };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RateLimitPolicy;
  }
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
}

interface Window {
  max: number;
  windowMs: number;
}

function windows(settings: EdgeSettings): Record<RateLimitBucket, Window> {
  return {
    key: { max: settings.RATE_LIMIT_KEY_MAX, windowMs: settings.RATE_LIMIT_KEY_WINDOW_SECONDS * 1000 },
    account: { max: settings.RATE_LIMIT_ACCOUNT_MAX, windowMs: settings.RATE_LIMIT_ACCOUNT_WINDOW_SECONDS * 1000 },
    public: { max: settings.RATE_LIMIT_PUBLIC_MAX, windowMs: settings.RATE_LIMIT_PUBLIC_WINDOW_SECONDS * 1000 },
    login: { max: settings.RATE_LIMIT_LOGIN_MAX, windowMs: settings.RATE_LIMIT_LOGIN_WINDOW_SECONDS * 1000 },
    register: { max: settings.RATE_LIMIT_REGISTER_MAX, windowMs: settings.RATE_LIMIT_REGISTER_WINDOW_SECONDS * 1000 },
  };
}

// Fixed windows, many subjects in one call: the first hit of a window sets its expiry; every hit
// returns its count and the time left. KEYS are the counters, ARGV[i] the window (ms) of KEYS[i].
const HITS = `
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[i])
  local count = redis.call('INCR', key)
  if count == 1 then redis.call('PEXPIRE', key, window) end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  out[#out + 1] = count
  out[#out + 1] = ttl
end
return out`;

type LimiterRedis = Redis & { rateLimitHits(numberOfKeys: number, ...keysThenWindows: Array<string | number>): Promise<number[]> };

/** Most counters one script call updates; a larger backlog goes out in several calls. */
const MAX_HITS_PER_CALL = 512;

interface PendingHit {
  key: string;
  windowMs: number;
  resolve(hit: [count: number, ttlMs: number]): void;
  reject(error: unknown): void;
}

/**
 * Counts hits in Redis, many per round trip: the hits made while the event loop is busy (every
 * request that arrived in the same turn) leave together in one script call on the next turn, so a
 * busy edge makes one Redis write for many requests instead of one each. Every hit is still counted
 * in Redis before its request goes on, so the limit holds exactly across edge instances.
 */
export class HitBatcher {
  private pending: PendingHit[] = [];
  private scheduled = false;
  /** Counters since start: script calls made and hits they carried. */
  readonly stats = { calls: 0, hits: 0 };

  constructor(private readonly redis: LimiterRedis) {
    if (typeof redis.rateLimitHits !== 'function') redis.defineCommand('rateLimitHits', { lua: HITS });
  }

  hit(key: string, windowMs: number): Promise<[number, number]> {
    return new Promise((resolve, reject) => {
      this.pending.push({ key, windowMs, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_HITS_PER_CALL);
      this.stats.calls += 1;
      this.stats.hits += batch.length;
      this.redis
        .rateLimitHits(batch.length, ...batch.map((h) => h.key), ...batch.map((h) => h.windowMs))
        .then((out) => {
          if (!Array.isArray(out) || out.length !== 2 * batch.length) throw new Error('unexpected rate-limit script reply');
          batch.forEach((h, i) => h.resolve([Number(out[2 * i]), Number(out[2 * i + 1])]));
        })
        .catch((error: unknown) => batch.forEach((h) => h.reject(error)));
    }
  }
}

/**
 * The address a client is counted by: an IPv4 address as is (also when IPv4-mapped), an IPv6
 * address by its /64, the block one subscriber usually holds, so hopping through it gains nothing.
 */
export function clientAddress(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped?.[1]) return mapped[1];
  if (!isIPv6(ip)) return ip;
  const [head = '', tail] = ip.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** The subject a request is counted against, and under which policy. */
function bucket(request: FastifyRequest): { policy: RateLimitBucket; subject: string } {
  const declared = request.routeOptions.config.rateLimit;
  if (declared === 'login' || declared === 'register') return { policy: declared, subject: `ip:${clientAddress(request.ip)}` };
  const auth = request.auth;
  if (auth) return { policy: 'key', subject: auth.keyId ? `key:${auth.keyId}` : `account:${auth.accountId}` };
  return { policy: 'public', subject: `ip:${clientAddress(request.ip)}` };
}

/** Routes under /api/ are limited unless they opt out (health probes); unknown routes are not. */
export function isLimited(request: FastifyRequest): boolean {
  const url = request.routeOptions.url;
  return url !== undefined && url.startsWith('/api/') && request.routeOptions.config.rateLimit !== false;
}

/**
 * Rate limits in Redis, shared by every edge instance (fixed windows; the hits of one event-loop turn
 * share one Lua call).
 * Every limited response carries X-RateLimit-Limit and X-RateLimit-Remaining; over the limit the
 * answer is 429 `rate_limited` with Retry-After. If Redis cannot be reached the request is let
 * through (fail open) and a warning is logged at most every 10 seconds: an outage of the limiter
 * must not take the whole gateway down. Runs after authentication, so it can count per key; a request
 * whose credential is refused is counted against its address's public budget by the auth plugin.
 */
export default fp(
  async function rateLimitPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const hits = new HitBatcher(app.deps.redis as LimiterRedis);
    const limits = windows(settings);
    let lastWarning = 0;

    async function consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string, options: { headers?: boolean } = {}): Promise<void> {
      const limit = limits[policy];
      let count: number;
      let ttlMs: number;
      try {
        [count, ttlMs] = await hits.hit(`${settings.REDIS_PREFIX}:ratelimit:${policy}:${subject}`, limit.windowMs);
      } catch (error) {
        // Sign-in and sign-up fail closed: unlimited password guessing, or unlimited accounts (each
        // with a sign-up credit), is worse than a minute of 503. Every other route fails open.
        const closed = policy === 'login' || policy === 'register';
        if (Date.now() - lastWarning > 10_000) {
          lastWarning = Date.now();
          request.log.warn({ err: error, policy }, closed ? 'rate limiter unavailable (Redis); refusing sign-in and sign-up' : 'rate limiter unavailable (Redis); letting requests through');
        }
        if (closed) {
          throw new PlatformError('service_unavailable', 'Sign-in and sign-up are paused: their rate limiter is unavailable', {
            hint: 'Retry after the number of seconds in Retry-After.',
            headers: { 'Retry-After': '30' },
          });
        }
        return;
      }
      const resetSeconds = Math.max(1, Math.ceil(ttlMs / 1000));
      const over = count > limit.max;
      if (options.headers !== false || over) {
        reply.header('X-RateLimit-Limit', String(limit.max));
        reply.header('X-RateLimit-Remaining', String(Math.max(0, limit.max - count)));
        reply.header('X-RateLimit-Reset', String(resetSeconds));
      }
      if (over) {
        throw new PlatformError('rate_limited', `Too many requests: the limit is ${limit.max} per ${limit.windowMs / 1000} seconds`, {
          hint: `Wait ${resetSeconds} seconds (Retry-After) before retrying.`,
          headers: { 'Retry-After': String(resetSeconds) },
          details: { retryAfter: resetSeconds },
        });
      }
    }
    async function consumeLimits(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const { policy, subject } = bucket(request);
      const accountId = request.auth?.accountId;
      if (policy === 'key' && accountId) {
        // Beside each key's own limit, the account's: more keys do not buy more calls. Both hits go
        // to Redis in the same script call; the headers describe the key's limit unless the
        // account's is the one exceeded.
        await Promise.all([consume(request, reply, policy, subject), consume(request, reply, 'account', `account:${accountId}`, { headers: false })]);
        return;
      }
      await consume(request, reply, policy, subject);
    }
    app.decorate('rateLimiter', { consume, consumeCaller: consumeLimits, stats: hits.stats } satisfies RateLimiter);

    app.addHook('onRequest', async (request, reply) => {
      if (!isLimited(request)) return;
      await consumeLimits(request, reply);
    });
  },
  { name: 'rate-limit', dependencies: ['deps', 'auth'] },
);
