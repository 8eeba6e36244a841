import { isIPv6 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';
import { PlatformError } from '../../../../db/src/errors.js';
import type { EdgeSettings } from '../config.js';

/**
 * Route-level rate-limit policy, declared in `config.rateLimit`: 'login' and 'register' are strict
 * per-address limits; `false` exempts the route (health probes). Unset, a route under /api/ is
 * limited per key (or per account for the dashboard cookie) when the caller authenticated, and per
 * client address otherwise.
 */
export type RateLimitPolicy = 'login' | 'register' | false;

export type RateLimitBucket = 'key' | 'public' | 'login' | 'register';

export interface RateLimiter {
  /**
   * Counts one hit of `subject` under `policy`, sets the limit headers on the reply, and throws 429
   * `rate_limited` when the window's budget is spent. Lets the request through when Redis is down.
   */
  consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string): Promise<void>;
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
    public: { max: settings.RATE_LIMIT_PUBLIC_MAX, windowMs: settings.RATE_LIMIT_PUBLIC_WINDOW_SECONDS * 1000 },
    login: { max: settings.RATE_LIMIT_LOGIN_MAX, windowMs: settings.RATE_LIMIT_LOGIN_WINDOW_SECONDS * 1000 },
    register: { max: settings.RATE_LIMIT_REGISTER_MAX, windowMs: settings.RATE_LIMIT_REGISTER_WINDOW_SECONDS * 1000 },
  };
}

// Fixed window: the first hit of a window sets its expiry; every hit returns the count and time left.
const HIT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}`;

type LimiterRedis = Redis & { rateLimitHit(key: string, windowMs: number): Promise<[number, number]> };

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
 * Rate limits in Redis, shared by every edge instance (fixed windows, one Lua call per request).
 * Every limited response carries X-RateLimit-Limit and X-RateLimit-Remaining; over the limit the
 * answer is 429 `rate_limited` with Retry-After. If Redis cannot be reached the request is let
 * through (fail open) and a warning is logged at most every 10 seconds: an outage of the limiter
 * must not take the whole gateway down. Runs after authentication, so it can count per key; a request
 * whose credential is refused is counted against its address's public budget by the auth plugin.
 */
export default fp(
  async function rateLimitPlugin(app: FastifyInstance) {
    const { settings } = app.deps;
    const redis = app.deps.redis as LimiterRedis;
    if (typeof redis.rateLimitHit !== 'function') redis.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: HIT });
    const limits = windows(settings);
    let lastWarning = 0;

    async function consume(request: FastifyRequest, reply: FastifyReply, policy: RateLimitBucket, subject: string): Promise<void> {
      const limit = limits[policy];
      let count: number;
      let ttlMs: number;
      try {
        [count, ttlMs] = await redis.rateLimitHit(`${settings.REDIS_PREFIX}:ratelimit:${policy}:${subject}`, limit.windowMs);
      } catch (error) {
        if (Date.now() - lastWarning > 10_000) {
          lastWarning = Date.now();
          request.log.warn({ err: error }, 'rate limiter unavailable (Redis); letting requests through');
        }
        return;
      }
      const resetSeconds = Math.max(1, Math.ceil(ttlMs / 1000));
      reply.header('X-RateLimit-Limit', String(limit.max));
      reply.header('X-RateLimit-Remaining', String(Math.max(0, limit.max - count)));
      reply.header('X-RateLimit-Reset', String(resetSeconds));
      if (count > limit.max) {
        throw new PlatformError('rate_limited', `Too many requests: the limit is ${limit.max} per ${limit.windowMs / 1000} seconds`, {
          hint: `Wait ${resetSeconds} seconds (Retry-After) before retrying.`,
          headers: { 'Retry-After': String(resetSeconds) },
          details: { retryAfter: resetSeconds },
        });
      }
    }
    app.decorate('rateLimiter', { consume } satisfies RateLimiter);

    app.addHook('onRequest', async (request, reply) => {
      if (!isLimited(request)) return;
      const { policy, subject } = bucket(request);
      await consume(request, reply, policy, subject);
    });
  },
  { name: 'rate-limit', dependencies: ['deps', 'auth'] },
);
