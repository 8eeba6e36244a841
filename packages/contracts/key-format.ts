import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key format: `service_sk_` + 48 lowercase hex digits. The first 40 digits are 20 random bytes;
 * the last 8 are the CRC-32 (IEEE, as zlib computes it) of the text before them, prefix included,
 * written as 8 lowercase hex digits. The checksum lets the edge reject a mistyped key before any
 * database look-up and lets a secret scanner tell a real key from random text. It is not a
 * security measure: only the SHA-256 of the full key is stored, and look-ups go by that hash.
 */
export const KEY_PREFIX = 'service_sk_';
const BODY_HEX = 40;
const KEY_PATTERN = /^service_sk_[0-9a-f]{48}$/;

function checksum(text: string): string {
  return crc32(text).toString(16).padStart(8, '0');
}

export interface GeneratedKey {
  fullKey: string;
  hash: Buffer;
  /** What listings show: the prefix plus the first 8 hex digits. */
  displayPrefix: string;
}

export function generateKey(): GeneratedKey {
  const body = KEY_PREFIX + randomBytes(BODY_HEX / 2).toString('hex');
  const fullKey = body + checksum(body);
  return { fullKey, hash: hashKey(fullKey), displayPrefix: displayPrefix(fullKey) };
}

export function hashKey(fullKey: string): Buffer {
  // One-shot: no Hash object per call (every authenticated request hashes its key).
  return hash('sha256', fullKey, 'buffer');
}

export function displayPrefix(fullKey: string): string {
  return fullKey.slice(0, KEY_PREFIX.length + 8);
}

export type KeyShapeProblem = 'prefix' | 'format' | 'checksum';

/** Why a candidate is not a well-formed key, or null when it is one (it may still be unknown). */
export function keyShapeProblem(candidate: string): KeyShapeProblem | null {
  if (!candidate.startsWith(KEY_PREFIX)) return 'prefix';
  if (!KEY_PATTERN.test(candidate)) return 'format';
  const body = candidate.slice(0, KEY_PREFIX.length + BODY_HEX);
  if (checksum(body) !== candidate.slice(KEY_PREFIX.length + BODY_HEX)) return 'checksum';
  return null;
}

/** Short random ids for rows shown in URLs: `key_3f9a...`; 16 hex digits, unguessable in practice. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(8).toString('hex')}`;
}
