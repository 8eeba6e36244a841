import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { listLivePersonSessions, revokePersonSessions, type DashboardSessionRow } from '#db/dashboard-sessions';
import { findPersonByResetToken, getPersonWithPassword, resetPasswordWithToken, setPassword, setResetToken, type PersonRow } from '#db/people';
import type { Db, Sql } from '#db/sql';
import { PlatformError } from '#core/platform';
import { assertPasswordPolicy, hashPassword, verifyPassword } from './passwords.js';

// Password reset by e-mail. The edge only asks for the e-mail (a job naming the person); the worker
// mints the one-time token when it sends, so the token exists as a SHA-256 in `people` and in the
// person's mailbox, never in Redis, logs or the queue board. One live link per person: asking again
// replaces it. Setting a password by the link spends it and ends every dashboard session.

const tokenHash = (token: string) => createHash('sha256').update(token).digest();

/**
 * Mints a fresh reset link for a person (an earlier link stops working). Null when the person is
 * gone by the time the e-mail is sent.
 */
export async function mintPasswordResetLink(
  db: Db,
  settings: { PUBLIC_URL: string; PASSWORD_RESET_TTL_MINUTES: number },
  personId: string,
): Promise<{ person: PersonRow; link: string; expiresAt: Date } | null> {
  const person = await getPersonWithPassword(db, personId);
  if (!person) return null;
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + settings.PASSWORD_RESET_TTL_MINUTES * 60_000);
  if (!(await setResetToken(db, person.id, tokenHash(token), expiresAt))) return null;
  // In the fragment, as invitations: browsers never send it to the server, so no access log holds it.
  const link = `${new URL(settings.PUBLIC_URL).origin}/reset-password#token=${token}`;
  return { person: { id: person.id, email: person.email, created_at: person.created_at }, link, expiresAt };
}

const HOUR_MS = 3_600_000;
// One counter per address digest and hour window, started by the window's first request.
const CLAIM = `
local sent = redis.call('INCR', KEYS[1])
if sent == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return sent`;

/**
 * Counts one reset e-mail against the address's hourly allowance, so nobody can flood a mailbox
 * through the platform. Past it the request is still answered alike (no enumeration, no signal to
 * the flooder); false means: send nothing.
 */
export async function claimPasswordResetSend(redis: Redis, prefix: string, addressDigest: string, perHour: number): Promise<boolean> {
  const sent = (await redis.eval(CLAIM, 1, `${prefix}:password-reset:${addressDigest}`, HOUR_MS)) as number;
  return sent <= perHour;
}

const invalidLink = () =>
  new PlatformError('validation_failed', 'This password reset link is not valid: it was used already, has expired or was replaced by a newer one', {
    hint: 'Ask for a new link on the sign-in page ("Forgot password?"); only the newest link works, once.',
  });

/**
 * Sets a new password with a reset link's token and signs the person out everywhere, in one
 * transaction. 400 when the token is spent, expired, replaced or wrong, or the password breaks the
 * policy (the link still works then).
 */
export async function resetPassword(sql: Sql, token: string, password: string): Promise<{ person: PersonRow; sessionsEnded: number }> {
  const hash = tokenHash(token);
  const person = await findPersonByResetToken(sql, hash);
  if (!person) throw invalidLink();
  assertPasswordPolicy(password, person.email);
  const passwordHash = await hashPassword(password);
  return sql.begin(async (tx) => {
    // The token is spent by the update itself, so two uses of one link cannot both succeed.
    const updated = await resetPasswordWithToken(tx, hash, passwordHash);
    if (!updated) throw invalidLink();
    const sessionsEnded = await revokePersonSessions(tx, updated.id);
    return { person: updated, sessionsEnded };
  });
}

/**
 * Changes a signed-in person's password: the current one must be right (401 `invalid_credentials`
 * otherwise); every other dashboard session of theirs ends, the one asking stays signed in.
 */
export async function changePassword(
  sql: Sql,
  input: { personId: string; currentPassword: string; newPassword: string; keepSessionId: string },
): Promise<{ sessionsEnded: number }> {
  const person = await getPersonWithPassword(sql, input.personId);
  if (!person) throw new PlatformError('invalid_session', 'This login no longer exists');
  if (!(await verifyPassword(input.currentPassword, person.password_hash))) {
    throw new PlatformError('invalid_credentials', 'The current password is wrong', {
      hint: 'Enter the password you sign in with now. Forgot it? Sign out and use "Forgot password?" on the sign-in page.',
    });
  }
  assertPasswordPolicy(input.newPassword, person.email);
  if (input.newPassword === input.currentPassword) {
    throw new PlatformError('validation_failed', 'The new password is the same as the current one', {
      hint: 'Choose a password you have not used here.',
    });
  }
  const passwordHash = await hashPassword(input.newPassword);
  return sql.begin(async (tx) => {
    await setPassword(tx, person.id, passwordHash);
    return { sessionsEnded: await revokePersonSessions(tx, person.id, input.keepSessionId) };
  });
}

/** A person's live dashboard sessions, newest first. */
export function listPersonSessions(db: Db, personId: string): Promise<(DashboardSessionRow & { account_email: string })[]> {
  return listLivePersonSessions(db, personId);
}

/** Ends a person's sessions, but for `exceptSessionId` when given; the number ended. */
export function signOutPerson(db: Db, personId: string, exceptSessionId: string | null = null): Promise<number> {
  return revokePersonSessions(db, personId, exceptSessionId);
}
