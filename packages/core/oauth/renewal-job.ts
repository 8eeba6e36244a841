import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { listOAuthConnectionsDue } from '#db/oauth';
import type { JobDeclaration } from '#core/platform';
import type { OAuthDeps } from './deps.js';
import { renewConnection, type RenewalOutcome } from './renewal.js';

/** The renewal job's settings (the queue workers'); see docs/OPERATIONS.md, "OAuth token renewal". */
export const oauthRenewalSettings = z.object({
  /** How often the renewal job runs. */
  OAUTH_RENEW_EVERY_SECONDS: z.coerce.number().int().min(5).max(3_600).default(60),
  /** An access token expiring within this many seconds is renewed by the job (well before a call would have to). */
  OAUTH_RENEW_AHEAD_SECONDS: z.coerce.number().int().min(60).max(86_400).default(600),
  /** A refresh token unused for this many hours is renewed anyway (providers expire idle ones); 0: never for idleness. */
  OAUTH_RENEW_IDLE_HOURS: z.coerce
    .number()
    .int()
    .min(0)
    .max(24 * 30)
    .default(24),
  /** At most this many renewals per run; the rest wait for the next run. */
  OAUTH_RENEW_BATCH: z.coerce.number().int().min(1).max(1_000).default(50),
  /** Average pause between two renewals of a run (jittered 50-150%), so a run does not burst at the providers. */
  OAUTH_RENEW_SPACING_MS: z.coerce.number().int().min(0).max(10_000).default(200),
});
export type OAuthRenewalSettings = z.output<typeof oauthRenewalSettings>;

/**
 * The repeatable renewal run. One attempt: a run that fails is followed by the next one anyway, and
 * each renewal in it is idempotent (row lock, "is it still due?").
 */
export const oauthRenewalJob: JobDeclaration<z.ZodObject<Record<string, never>>> = {
  queue: 'oauth',
  name: 'oauth-token-renewal',
  payload: z.object({}).strict(),
  options: { attempts: 1, backoff: { type: 'fixed', delay: 60_000 }, removeOnComplete: 20, removeOnFail: 50 },
};

export type RenewalTally = Record<RenewalOutcome['kind'], number> & { examined: number };

/**
 * One run of the renewal job: the ready connections whose access token expires within
 * OAUTH_RENEW_AHEAD_SECONDS, or whose refresh token has been idle OAUTH_RENEW_IDLE_HOURS, soonest
 * first, at most OAUTH_RENEW_BATCH, renewed one after another with jittered pauses through the same
 * renewConnection as calls use (so a call renewing the same connection meanwhile makes this one a
 * no-op). A provider that cannot be reached backs that connection off (refresh_retry_at) and the run
 * goes on; one that refuses marks it needs_reauth and tells the account.
 */
export async function renewDueConnections(
  deps: OAuthDeps,
  settings: OAuthRenewalSettings,
  options: { now?: () => number; random?: () => number; pause?: (ms: number) => Promise<unknown> } = {},
): Promise<RenewalTally> {
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const pause = options.pause ?? ((ms: number) => sleep(ms));
  const aheadMs = settings.OAUTH_RENEW_AHEAD_SECONDS * 1000;
  const idleBefore = settings.OAUTH_RENEW_IDLE_HOURS > 0 ? new Date(now() - settings.OAUTH_RENEW_IDLE_HOURS * 3_600_000) : null;
  const due = await listOAuthConnectionsDue(deps.sql, {
    expiringBefore: new Date(now() + aheadMs),
    idleBefore,
    limit: settings.OAUTH_RENEW_BATCH,
  });
  const tally: RenewalTally = { examined: due.length, renewed: 0, current: 0, needs_reauth: 0, unreachable: 0, gone: 0 };
  for (const [index, connection] of due.entries()) {
    if (index > 0 && settings.OAUTH_RENEW_SPACING_MS > 0) await pause(Math.round(settings.OAUTH_RENEW_SPACING_MS * (0.5 + random())));
    try {
      const outcome = await renewConnection(deps, connection.id, {
        cause: 'job',
        expiringWithinMs: aheadMs,
        ...(idleBefore ? { renewedBefore: idleBefore } : {}),
      });
      tally[outcome.kind] += 1;
    } catch (error) {
      // A database hiccup or a misregistered app (plain http): this connection waits for the next run, the others go on.
      tally.unreachable += 1;
      deps.log.warn({ err: error, connectionId: connection.id, provider: connection.provider }, 'OAuth renewal job could not renew a connection');
    }
  }
  return tally;
}
