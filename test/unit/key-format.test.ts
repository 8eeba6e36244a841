import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { generateKey, hashKey, keyShapeProblem, newId } from '#contracts/key-format';

describe('key format', () => {
  it('is service_sk_ + 48 lowercase hex whose last 8 are the CRC-32 of the rest', () => {
    const { fullKey, hash, displayPrefix } = generateKey();
    expect(fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expect(fullKey.slice(-8)).toBe(crc32(fullKey.slice(0, -8)).toString(16).padStart(8, '0'));
    expect(keyShapeProblem(fullKey)).toBeNull();
    expect(hash.equals(hashKey(fullKey))).toBe(true);
    expect(displayPrefix).toBe(fullKey.slice(0, 19));
  });

  it('names what is wrong with a candidate', () => {
    const { fullKey } = generateKey();
    expect(keyShapeProblem('sk_' + fullKey)).toBe('prefix');
    expect(keyShapeProblem(fullKey + '0')).toBe('format');
    expect(keyShapeProblem(fullKey.toUpperCase())).toBe('prefix');
    expect(keyShapeProblem(`service_sk_${fullKey.slice(11).toUpperCase()}`)).toBe('format');
    expect(keyShapeProblem(` ${fullKey}`)).toBe('prefix');
    const tampered = fullKey.slice(0, 20) + (fullKey[20] === 'a' ? 'b' : 'a') + fullKey.slice(21);
    expect(keyShapeProblem(tampered)).toBe('checksum');
  });

  it('catches every mistyped character of a key before any look-up', () => {
    const { fullKey } = generateKey();
    fc.assert(
      fc.property(fc.integer({ min: 0, max: fullKey.length - 1 }), fc.constantFrom(...'0123456789abcdefABCDEF_x '), (at, typed) => {
        fc.pre(fullKey[at] !== typed);
        const mistyped = fullKey.slice(0, at) + typed + fullKey.slice(at + 1);
        expect(keyShapeProblem(mistyped), mistyped).not.toBeNull();
      }),
      { numRuns: 500 },
    );
  });

  it('makes row ids of the prefix and 16 random hex digits', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newId('key')));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^key_[0-9a-f]{16}$/);
  });
});
