import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { PlatformError } from '#core/platform';

/**
 * Passwords are hashed with scrypt (memory-hard) from node:crypto: N = 2^15, r = 8, p = 1 (32 MiB
 * and roughly 50-100 ms per hash), a 16-byte random salt and a 32-byte output. The parameters are
 * stored with the hash (`scrypt$N$r$p$salt$hash`, base64url), so they can be raised later without
 * invalidating existing passwords.
 */
const PARAMS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_BYTES = 16;

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }, length: number): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, PARAMS, KEY_LENGTH);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

// Compared against when the email is unknown, so a miss costs the same time as a wrong password.
let dummyHash: Promise<string> | null = null;

/**
 * Checks a password against a stored hash in constant time. With no stored hash (unknown email or an
 * account without a password) it still does the full work and answers false, so timing does not
 * reveal whether an account exists.
 */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  if (stored === null) {
    dummyHash ??= hashPassword(randomBytes(16).toString('hex'));
    await verifyPassword(password, await dummyHash);
    return false;
  }
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, saltText, hashText] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(hashText, 'base64url');
  const actual = await derive(password, Buffer.from(saltText, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) }, expected.length);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export const PASSWORD_POLICY =
  'A password is 10 to 200 characters, has at least 5 different characters, and is neither your email nor a commonly used password.';

const COMMON_PASSWORDS = new Set([
  '1234567890',
  '0123456789',
  '12345678910',
  '1111111111',
  '0987654321',
  'qwertyuiop',
  'password12',
  'password123',
  'password1234',
  'passw0rd123',
  'iloveyou12',
  'qwerty1234',
  'qwerty12345',
  '1q2w3e4r5t',
  '1qaz2wsx3edc',
  'abcdefghij',
  'abc1234567',
  'letmein123',
  'welcome123',
  'changeme123',
  'administrator',
  'trustno1234',
  'superman123',
  'football123',
  'baseball123',
  'monkey1234',
  'sunshine123',
  'princess123',
  'dragon1234',
]);

/** Throws a 400 naming the policy when the password breaks it. */
export function assertPasswordPolicy(password: string, email: string): void {
  const problem =
    password.length < 10
      ? 'Password is too short'
      : password.length > 200
        ? 'Password is too long'
        : new Set(password).size < 5
          ? 'Password has too few different characters'
          : password.toLowerCase() === email.toLowerCase() || password.toLowerCase() === email.split('@')[0]?.toLowerCase()
            ? 'Password must not be your email'
            : COMMON_PASSWORDS.has(password.toLowerCase())
              ? 'Password is too common'
              : null;
  if (problem) throw new PlatformError('validation_failed', problem, { hint: PASSWORD_POLICY });
}
