import { randomBytes } from 'node:crypto';
import { routeOf } from '../http/route-options.js';
import { isIPv6 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { PlatformError } from '#core/platform';
import type { EdgeSettings } from '../config.js';
import { RateCounters, type Counted, type LimiterRedis, type LimiterStats, type QuotaLimit } from '../http/rate-limit-quotas.js';

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
   * `rate_limited` when the window's budget is spent. When Redis is down it lets the request through,
   * except under 'login' and 'register' (503).
   */
  consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string): Promise<void>;
  /**
   * Counts one hit of an authenticated request against its key's and its account's budgets, as
   * every limited route under /api/ does (used by routes outside /api/, such as /mcp).
   */
  consumeCaller(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /**
   * Counts `hits` hits of an authenticated request at once (the messages of an MCP batch), all
   * before any of them is served: throws 429 `rate_limited` when the budgets cannot cover them all.
   * Tokens granted to a refused batch stay spent, as a refused single hit's would in Redis.
   */
  consumeCallerHits(request: FastifyRequest, reply: FastifyReply, hits: number): Promise<void>;
  /**
   * A pass for `uses` route calls of this caller that were counted already (the tool calls of an
   * MCP batch, counted with the batch): each tool call spends one use (`usePrepaid`) instead of
   * being counted again. Bound to the caller's key or account, good for PREPAID_TTL_MS.
   */
  prepay(request: FastifyRequest, uses: number): string;
  /** Spends one use of a pass from `prepay` (a tool call made in-process); false when it is spent, expired or another caller's. */
  usePrepaid(request: FastifyRequest, id: string): boolean;
  /**
   * Hits counted, those answered without waiting on Redis (`local`), Redis script calls made and the
   * counter increments they carried (`claims`: many hits share a call on a busy edge, and a claimed
   * block of tokens is one increment).
   */
  readonly stats: Readonly<LimiterStats>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RateLimitPolicy;
  }
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
}

/** A pass outlives the longest batch it could be spent in (its tool calls run while it is answered). */
const PREPAID_TTL_MS = 10 * 60_000;

interface Limit extends QuotaLimit {
  /** Every hit counted in Redis before it goes on, and refused when Redis cannot count it. */
  exact: boolean;
}

/** An edge holds at most this share of a limit unspent (and at most RATE_LIMIT_LOCAL_BLOCK_MAX). */
const BLOCK_SHARE_OF_LIMIT = 1 / 20;

function limitsOf(settings: EdgeSettings): Record<RateLimitBucket, Limit> {
  const limit = (max: number, windowSeconds: number, exact = false): Limit => ({
    max,
    windowMs: windowSeconds * 1000,
    exact,
    blockMax: exact ? 1 : Math.max(1, Math.min(settings.RATE_LIMIT_LOCAL_BLOCK_MAX, Math.floor(max * BLOCK_SHARE_OF_LIMIT))),
  });
  return {
    key: limit(settings.RATE_LIMIT_KEY_MAX, settings.RATE_LIMIT_KEY_WINDOW_SECONDS),
    account: limit(settings.RATE_LIMIT_ACCOUNT_MAX, settings.RATE_LIMIT_ACCOUNT_WINDOW_SECONDS),
    public: limit(settings.RATE_LIMIT_PUBLIC_MAX, settings.RATE_LIMIT_PUBLIC_WINDOW_SECONDS),
    // Sign-in and sign-up guard passwords and the sign-up credit: counted one by one, never ahead.
    login: limit(settings.RATE_LIMIT_LOGIN_MAX, settings.RATE_LIMIT_LOGIN_WINDOW_SECONDS, true),
    register: limit(settings.RATE_LIMIT_REGISTER_MAX, settings.RATE_LIMIT_REGISTER_WINDOW_SECONDS, true),
  };
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
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/** The subject a request is counted against, and under which policy. */
function bucket(request: FastifyRequest): { policy: RateLimitBucket; subject: string } {
  const declared = routeOf(request).config.rateLimit;
  if (declared === 'login' || declared === 'register') return { policy: declared, subject: `ip:${clientAddress(request.ip)}` };
  const auth = request.auth;
  if (auth) return { policy: 'key', subject: auth.keyId ? `key:${auth.keyId}` : `account:${auth.accountId}` };
  return { policy: 'public', subject: `ip:${clientAddress(request.ip)}` };
}

/** Routes under /api/ are limited unless they opt out (health probes); unknown routes are not. */
export function isLimited(request: FastifyRequest): boolean {
  const url = routeOf(request).url;
  return url !== undefined && url.startsWith('/api/') && routeOf(request).config.rateLimit !== false;
}

/**
 * Rate limits in Redis, shared by every edge instance (fixed windows). Sign-in and sign-up count each
 * hit in Redis before it goes on; the other budgets (key, account, public) are spent from local
 * quotas: an edge claims a block of a subject's budget at once and spends it without a round trip,
 * claiming the next block ahead of time, so steady traffic never waits on Redis (see LocalQuota in
 * http/rate-limit-quotas.ts; a subject's first hit on an edge, and a hit that finds no token left,
 * wait for Redis). No edge ever admits past what Redis granted it, so a window's `max` holds across
 * edges; tokens one edge holds unspent (at most the block ceiling, `blockMax`) are lost to the others
 * for the rest of the window.
 * Every limited response carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset;
 * over the limit the answer is 429 `rate_limited` with Retry-After. If Redis cannot be reached the
 * request is let through (fail open) and a warning is logged at most every 10 seconds: an outage of
 * the limiter must not take the whole gateway down. Runs after authentication, so it can count per
 * key; a request whose credential is refused is counted against its address's public budget by the
 * auth plugin.
 */
export default fp(
  async function rateLimitPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const counters = new RateCounters(app.deps.redis as LimiterRedis);
    app.addHook('onClose', async () => counters.close());
    const limits = limitsOf(settings);
    let lastWarning = 0;

    function count(policy: RateLimitBucket, subject: string): Counted | Promise<Counted> {
      const limit = limits[policy];
      const key = `${settings.REDIS_PREFIX}:ratelimit:${policy}:${subject}`;
      return limit.exact ? counters.exact(key, limit) : counters.local(key, limit);
    }

    /** Sets the limit headers (always when `headers`, else only past the limit) and throws 429 past it. */
    function settle(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, counted: Counted, headers: boolean): void {
      const limit = limits[policy];
      if (counted.outcome === 'unavailable') {
        // Sign-in and sign-up fail closed: unlimited password guessing, or unlimited accounts (each
        // with a sign-up credit), is worse than a minute of 503. Every other route fails open.
        if (Date.now() - lastWarning > 10_000) {
          lastWarning = Date.now();
          request.log.warn(
            { err: counted.error, policy },
            limit.exact
              ? 'rate limiter unavailable (Redis); refusing sign-in and sign-up'
              : 'rate limiter unavailable (Redis); letting requests through',
          );
        }
        if (limit.exact) {
          throw new PlatformError('service_unavailable', 'Sign-in and sign-up are paused: their rate limiter is unavailable', {
            hint: 'Retry after the number of seconds in Retry-After.',
            headers: { 'Retry-After': '30' },
          });
        }
        return;
      }
      const resetSeconds = Math.max(1, Math.ceil(counted.resetMs / 1000));
      const refused = counted.outcome === 'refused';
      if (headers || refused) {
        reply.header('X-RateLimit-Limit', String(limit.max));
        // Exact policies: the window's budget minus its count in Redis. Local quotas: what this edge
        // knows is left (the budget no edge had claimed at its latest claim plus the tokens it holds),
        // so another edge's unspent tokens count as used; alone, an edge counts down exactly.
        reply.header('X-RateLimit-Remaining', String(refused ? 0 : counted.remaining));
        reply.header('X-RateLimit-Reset', String(resetSeconds));
      }
      if (refused) {
        throw new PlatformError('rate_limited', `Too many requests: the limit is ${limit.max} per ${limit.windowMs / 1000} seconds`, {
          hint: `Wait ${resetSeconds} seconds (Retry-After) before retrying.`,
          headers: { 'Retry-After': String(resetSeconds) },
          details: { retryAfter: resetSeconds },
        });
      }
    }

    async function consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string): Promise<void> {
      settle(request, reply, policy, await count(policy, subject), true);
    }

    /** Counts a limited request; answers at once (no promise) when every budget had a local token. */
    function consumeLimits(request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
      const { policy, subject } = bucket(request);
      const accountId = request.auth?.accountId;
      // Beside each key's own limit, the account's: more keys do not buy more calls. Both are counted
      // before either is settled; the headers describe the key's limit unless the account's is the
      // one exceeded.
      const own = count(policy, subject);
      const account = policy === 'key' && accountId ? count('account', `account:${accountId}`) : undefined;
      if (own instanceof Promise || account instanceof Promise)
        return Promise.all([own, account]).then(([o, a]) => settleCaller(request, reply, policy, o, a));
      settleCaller(request, reply, policy, own, account);
    }

    function settleCaller(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, own: Counted, account: Counted | undefined): void {
      settle(request, reply, policy, own, true);
      if (account) settle(request, reply, 'account', account, false);
    }

    /** Passes from `prepay`: calls left, whose they are and until when. */
    const passes = new Map<string, { uses: number; subject: string; expiresAt: number }>();
    const callerSubject = (request: FastifyRequest) => bucket(request).subject;

    function prepay(request: FastifyRequest, uses: number): string {
      const now = Date.now();
      for (const [id, pass] of passes) if (pass.expiresAt <= now) passes.delete(id);
      const id = randomBytes(18).toString('base64url');
      passes.set(id, { uses, subject: callerSubject(request), expiresAt: now + PREPAID_TTL_MS });
      return id;
    }

    /** Spends one use of pass `id` when it is live and the request's caller's. */
    function usePrepaid(request: FastifyRequest, id: string): boolean {
      const pass = passes.get(id);
      if (!pass || pass.expiresAt <= Date.now() || pass.subject !== callerSubject(request)) return false;
      pass.uses -= 1;
      if (pass.uses <= 0) passes.delete(id);
      return true;
    }

    app.decorate('rateLimiter', {
      consume,
      consumeCaller: async (request, reply) => consumeLimits(request, reply),
      // Every hit is counted before any is settled; the first refusal refuses them all.
      consumeCallerHits: async (request, reply, hits) => {
        await Promise.all(Array.from({ length: Math.max(1, hits) }, async () => consumeLimits(request, reply)));
      },
      prepay,
      usePrepaid,
      stats: counters.stats,
    } satisfies RateLimiter);

    app.addHook('onRequest', async (request, reply) => {
      if (!isLimited(request)) return;
      const pending = consumeLimits(request, reply);
      if (pending) await pending;
    });
  },
  { name: 'rate-limit', dependencies: ['deps', 'auth'] },
);
