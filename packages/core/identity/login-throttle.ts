import type { Redis } from 'ioredis';
import { PlatformError } from '#core/platform';

/** How failed sign-ins slow down (the edge's LOGIN_* settings). */
export interface LoginThrottleSettings {
  /** Failures one client may make at one address in the window before each further one waits. */
  LOGIN_FREE_FAILURES_PER_ADDRESS: number;
  /** Failures one client may make over all addresses in the window before each further one waits. */
  LOGIN_FREE_FAILURES_PER_CLIENT: number;
  /** How long failures are remembered (the window restarts with each failure). */
  LOGIN_FAILURE_WINDOW_SECONDS: number;
  /** The first wait past the free failures; each further failure doubles it, up to the maximum. */
  LOGIN_DELAY_BASE_SECONDS: number;
  LOGIN_DELAY_MAX_SECONDS: number;
  /** Distinct failing clients at one address within the alert window that look like an attack. */
  LOGIN_ALERT_CLIENTS: number;
  LOGIN_ALERT_WINDOW_SECONDS: number;
}

// KEYS: failures (address, client), failures (client), wait (address, client), wait (client),
//       failing clients of the address (HyperLogLog: fixed size however many), alert sent.
// ARGV: window ms, free per address, free per client, base ms, max ms, client, alert window ms, alert clients.
const FAIL = `
local window = tonumber(ARGV[1])
local function fail(counter, wait, free)
  local n = redis.call('INCR', counter)
  redis.call('PEXPIRE', counter, window)
  if n > free then
    local delay = math.min(tonumber(ARGV[5]), tonumber(ARGV[4]) * 2 ^ math.min(n - free - 1, 40))
    redis.call('SET', wait, '1', 'PX', math.max(1, math.floor(delay)))
  end
end
fail(KEYS[1], KEYS[3], tonumber(ARGV[2]))
fail(KEYS[2], KEYS[4], tonumber(ARGV[3]))
redis.call('PFADD', KEYS[5], ARGV[6])
if redis.call('PTTL', KEYS[5]) < 0 then redis.call('PEXPIRE', KEYS[5], ARGV[7]) end
local clients = redis.call('PFCOUNT', KEYS[5])
local alert = 0
if clients >= tonumber(ARGV[8]) and redis.call('SET', KEYS[6], '1', 'PX', ARGV[7], 'NX') then alert = 1 end
return {clients, alert}`;

const WAIT = `
local a = redis.call('PTTL', KEYS[1])
local b = redis.call('PTTL', KEYS[2])
return math.max(a, b)`;

/**
 * Sign-in throttling as OWASP's authentication guidance asks: failures are counted per client
 * (address block) and per (e-mail address, client), never per e-mail address alone, so nobody can
 * lock a person out by failing at their address; a correct password from a client that is not itself
 * slowed down signs in. Past a few free failures each one makes the next attempt wait, doubling up
 * to a ceiling; no wait lasts longer than that and nothing locks for good. Many distinct clients
 * failing at one address within a window is reported once per window, so the person can be told.
 * Redis unavailable: sign-in is refused (503), as the route's rate limit does.
 */
export class LoginThrottle {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly settings: LoginThrottleSettings,
  ) {}

  private keys(addressDigest: string, client: string) {
    const base = `${this.prefix}:login`;
    return {
      pairFailures: `${base}:fail:pair:${addressDigest}:${client}`,
      clientFailures: `${base}:fail:client:${client}`,
      pairWait: `${base}:wait:pair:${addressDigest}:${client}`,
      clientWait: `${base}:wait:client:${client}`,
      failingClients: `${base}:clients:${addressDigest}`,
      alerted: `${base}:alerted:${addressDigest}`,
    };
  }

  private async redisCall<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new PlatformError('service_unavailable', 'Sign-in is paused: its failure counter is unavailable', {
        hint: 'Retry after the number of seconds in Retry-After.',
        headers: { 'Retry-After': '30' },
        cause: error,
      });
    }
  }

  /** Throws 429 `rate_limited` (with Retry-After) while this client must wait, at this address or at all. */
  async assertMayTry(addressDigest: string, client: string): Promise<void> {
    const k = this.keys(addressDigest, client);
    const waitMs = (await this.redisCall(() => this.redis.eval(WAIT, 2, k.pairWait, k.clientWait))) as number;
    if (waitMs <= 0) return;
    const retryAfter = Math.max(1, Math.ceil(waitMs / 1000));
    throw new PlatformError('rate_limited', 'Too many failed sign-ins from your network: wait before trying again', {
      hint: `Wait ${retryAfter} seconds (Retry-After). Each further failure doubles the wait; a correct password afterwards signs in as usual.`,
      headers: { 'Retry-After': String(retryAfter) },
      details: { retryAfter },
    });
  }

  /** Records a failure; `alert` is true once per alert window when the address looks under attack. */
  async recordFailure(addressDigest: string, client: string): Promise<{ failingClients: number; alert: boolean }> {
    const k = this.keys(addressDigest, client);
    const s = this.settings;
    const [failingClients, alert] = (await this.redisCall(() =>
      this.redis.eval(
        FAIL,
        6,
        k.pairFailures,
        k.clientFailures,
        k.pairWait,
        k.clientWait,
        k.failingClients,
        k.alerted,
        s.LOGIN_FAILURE_WINDOW_SECONDS * 1000,
        s.LOGIN_FREE_FAILURES_PER_ADDRESS,
        s.LOGIN_FREE_FAILURES_PER_CLIENT,
        s.LOGIN_DELAY_BASE_SECONDS * 1000,
        s.LOGIN_DELAY_MAX_SECONDS * 1000,
        client,
        s.LOGIN_ALERT_WINDOW_SECONDS * 1000,
        s.LOGIN_ALERT_CLIENTS,
      ),
    )) as [number, number];
    return { failingClients, alert: alert === 1 };
  }

  /** A correct password clears this client's failures at this address (not its failures elsewhere). */
  async recordSuccess(addressDigest: string, client: string): Promise<void> {
    const k = this.keys(addressDigest, client);
    await this.redisCall(() => this.redis.del(k.pairFailures, k.pairWait));
  }
}
