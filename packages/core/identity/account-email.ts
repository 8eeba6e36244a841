import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  confirmEmailChangeWithToken,
  emailInUse,
  followPersonEmail,
  getOwnerEmailState,
  getPersonEmailState,
  getPersonWithPassword,
  markEmailVerified,
  setEmailChangeToken,
  setPendingEmail,
  setVerifyToken,
  verifyEmailWithToken,
  type PersonEmailState,
  type PersonRow,
} from '#db/people';
import { getAccount, type AccountRow } from '#db/accounts';
import type { Db, Sql } from '#db/sql';
import { PlatformError } from '#core/platform';
import { verifyPassword } from './passwords.js';

// A person's address: verified once they open a link mailed to it, and changed only when the new
// address confirms. As with password reset, the edge only asks for the e-mail (a job naming the
// person) and the worker mints the one-time token when it sends: tokens live as SHA-256 in `people`
// and in the mailbox, never in Redis, logs or the queue board. One live link of each kind per person.

const tokenHash = (token: string) => createHash('sha256').update(token).digest();

type LinkSettings = { PUBLIC_URL: string; EMAIL_VERIFY_TTL_HOURS: number };

const linkTo = (settings: LinkSettings, path: string, token: string) => `${new URL(settings.PUBLIC_URL).origin}${path}#token=${token}`;

/**
 * Mints a fresh verification link for a person whose address is not verified (an earlier link stops
 * working). Null when the person is gone or verified by the time the e-mail is sent.
 */
export async function mintVerificationLink(
  db: Db,
  settings: LinkSettings,
  personId: string,
): Promise<{ person: PersonRow; link: string; expiresAt: Date } | null> {
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + settings.EMAIL_VERIFY_TTL_HOURS * 3_600_000);
  const person = await setVerifyToken(db, personId, tokenHash(token), expiresAt);
  if (!person) return null;
  // In the fragment, as reset links: browsers never send it to the server, so no access log holds it.
  return { person, link: linkTo(settings, '/verify-email', token), expiresAt };
}

/**
 * Mints the confirmation link of a pending address change, to be mailed to the new address. Null when
 * the person is gone or the change was cancelled (or confirmed) before the e-mail went out.
 */
export async function mintEmailChangeLink(
  db: Db,
  settings: LinkSettings,
  personId: string,
): Promise<{ to: string; currentEmail: string; link: string; expiresAt: Date } | null> {
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + settings.EMAIL_VERIFY_TTL_HOURS * 3_600_000);
  const row = await setEmailChangeToken(db, personId, tokenHash(token), expiresAt);
  if (!row) return null;
  return { to: row.pending_email, currentEmail: row.email, link: linkTo(settings, '/confirm-email', token), expiresAt };
}

const HOUR_MS = 3_600_000;
const CLAIM = `
local sent = redis.call('INCR', KEYS[1])
if sent == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return sent`;

/**
 * Counts one account e-mail (verification or address change) against the person's hourly
 * allowance; past it the request is refused with 429, so nobody floods a mailbox through the platform.
 */
export async function claimAccountEmail(redis: Redis, prefix: string, personId: string, perHour: number): Promise<void> {
  const key = `${prefix}:account-email:${personId}`;
  const sent = (await redis.eval(CLAIM, 1, key, HOUR_MS)) as number;
  if (sent > perHour) {
    const ttl = await redis.pttl(key);
    const retryAfter = Math.max(1, Math.ceil((ttl > 0 ? ttl : HOUR_MS) / 1000));
    throw new PlatformError('rate_limited', `You asked for ${perHour} of these e-mails within the hour`, {
      hint: `Look for the e-mail already sent (also in the spam folder), or ask again in ${Math.ceil(retryAfter / 60)} minute(s).`,
      headers: { 'Retry-After': String(retryAfter) },
      details: { retryAfter },
    });
  }
}

const invalidVerifyLink = () =>
  new PlatformError('validation_failed', 'This verification link is not valid: it was used already, has expired or was replaced by a newer one', {
    hint: 'Sign in and ask for a new link on the Settings page; only the newest link works, once.',
  });

/** Verifies the address behind a verification link's token; 400 when the token is not live. */
export async function verifyEmail(db: Db, token: string): Promise<PersonRow> {
  const person = await verifyEmailWithToken(db, tokenHash(token));
  if (!person) throw invalidVerifyLink();
  return person;
}

/** A person's address, whether it is verified, and the address they are changing to. */
export async function personEmailState(db: Db, personId: string): Promise<PersonEmailState> {
  const state = await getPersonEmailState(db, personId);
  if (!state) throw new PlatformError('invalid_session', 'This login no longer exists');
  return state;
}

/**
 * The account owner's address state; for an account no person owns (made for keys only), null: it
 * cannot be verified, and counts as not verified.
 */
export function ownerEmailState(db: Db, accountId: string): Promise<PersonEmailState | null> {
  return getOwnerEmailState(db, accountId);
}

/** The account with its owner's address state (null for an account no person owns); 401 when it is gone. */
export async function accountOverview(db: Db, accountId: string): Promise<{ account: AccountRow; owner: PersonEmailState | null }> {
  const account = await getAccount(db, accountId);
  if (!account) throw new PlatformError('invalid_session', 'Account no longer exists');
  return { account, owner: await getOwnerEmailState(db, accountId) };
}

/**
 * 403 `email_unverified` when verification is required and the account's owner has not verified the
 * address yet; `what` says what was refused, in the person's words.
 */
export async function assertEmailVerified(db: Db, settings: { EMAIL_VERIFICATION: 'required' | 'off' }, accountId: string, what: string) {
  if (settings.EMAIL_VERIFICATION === 'off') return;
  const owner = await getOwnerEmailState(db, accountId);
  if (owner?.email_verified_at) return;
  throw new PlatformError('email_unverified', `Verify the account's e-mail address before you ${what}`, {
    hint: owner
      ? `Open the link in the e-mail sent to ${owner.email}. No e-mail? Ask for a new link on the Settings page of the dashboard.`
      : 'This account has no owner who signs in, so its address cannot be verified.',
  });
}

/**
 * Starts an address change for a signed-in person: their password must be right (401
 * `invalid_credentials`), and the new address must be free (409 `email_taken`) and differ from the
 * current one (400). Nothing changes until the new address confirms; an earlier pending change is
 * replaced.
 */
export async function requestEmailChange(db: Db, input: { personId: string; password: string; newEmail: string }): Promise<{ pendingEmail: string }> {
  const person = await getPersonWithPassword(db, input.personId);
  if (!person) throw new PlatformError('invalid_session', 'This login no longer exists');
  if (!(await verifyPassword(input.password, person.password_hash))) {
    throw new PlatformError('invalid_credentials', 'The password is wrong', {
      hint: 'Enter the password you sign in with; changing the address needs it.',
    });
  }
  if (input.newEmail.toLowerCase() === person.email.toLowerCase()) {
    throw new PlatformError('validation_failed', 'This is already your address', { hint: 'Enter the new address you want to sign in with.' });
  }
  if (await emailInUse(db, input.newEmail)) {
    throw new PlatformError('email_taken', 'Another login or account already uses this address', {
      hint: 'Choose another address. If it is yours, delete the other account first or sign in with it.',
    });
  }
  await setPendingEmail(db, person.id, input.newEmail);
  return { pendingEmail: input.newEmail };
}

/** Forgets a pending address change; its link stops working. False when none was pending. */
export async function cancelEmailChange(db: Db, personId: string): Promise<boolean> {
  const state = await getPersonEmailState(db, personId);
  if (!state?.pending_email) return false;
  return setPendingEmail(db, personId, null);
}

const invalidChangeLink = () =>
  new PlatformError(
    'validation_failed',
    'This confirmation link is not valid: it was used already, has expired, or the change was cancelled or replaced',
    {
      hint: 'Sign in and ask for the change again on the Settings page; only the newest link works, once.',
    },
  );

/**
 * Confirms an address change with the link's token, in one transaction: the person signs in with the
 * new address from now on (verified), the account they own and their approver memberships carry it.
 * 400 when the token is not live; 409 `email_taken` when someone took the address meanwhile.
 */
export async function confirmEmailChange(sql: Sql, token: string): Promise<{ personId: string; email: string; previousEmail: string }> {
  const hash = tokenHash(token);
  try {
    return await sql.begin(async (tx) => {
      const changed = await confirmEmailChangeWithToken(tx, hash);
      if (!changed) throw invalidChangeLink();
      await followPersonEmail(tx, changed.id, changed.email);
      return { personId: changed.id, email: changed.email, previousEmail: changed.previous_email };
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === '23505') {
      throw new PlatformError('email_taken', 'Another login or account took this address since you asked', {
        hint: 'Ask for the change again with another address.',
      });
    }
    throw error;
  }
}

/** Marks a person's address verified (they opened another link mailed to it, such as an invitation). */
export function markPersonVerified(db: Db, personId: string): Promise<void> {
  return markEmailVerified(db, personId);
}
