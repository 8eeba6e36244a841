import type { Redis } from 'ioredis';
import { PlatformError } from '#core/platform';

const DAY_MS = 86_400_000;

// One counter per account and 24-hour window, which starts with the window's first invitation.
const CLAIM = `
local sent = redis.call('INCR', KEYS[1])
if sent == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {sent, redis.call('PTTL', KEYS[1])}`;

/**
 * Counts one invitation e-mail (a new invitation or a resend) against the account's daily allowance,
 * so nobody can use the platform to mail arbitrary addresses at volume. 429 `rate_limited`, with
 * Retry-After, past `perDay` in the window.
 */
export async function claimInviteSend(redis: Redis, prefix: string, accountId: string, perDay: number): Promise<void> {
  const [sent, ttlMs] = (await redis.eval(CLAIM, 1, `${prefix}:invites:${accountId}`, DAY_MS)) as [number, number];
  if (sent <= perDay) return;
  const retryAfter = Math.max(1, Math.ceil((ttlMs > 0 ? ttlMs : DAY_MS) / 1000));
  throw new PlatformError('rate_limited', `This account has sent its ${perDay} invitation e-mails for today (invitations and resends count alike)`, {
    hint: `Try again in ${Math.ceil(retryAfter / 3600)} hour(s) (Retry-After, in seconds); the people already invited can still accept. The operator sets the allowance (INVITES_PER_ACCOUNT_PER_DAY).`,
    headers: { 'Retry-After': String(retryAfter) },
    details: { retryAfter },
  });
}
