import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDollars, parseDollars, toDollars } from '#contracts/money';

describe('money', () => {
  it('formats micro-dollars exactly', () => {
    expect(formatDollars(10_000n)).toBe('0.01');
    expect(formatDollars(5_000n)).toBe('0.005');
    expect(formatDollars(1_500_000n)).toBe('1.5');
    expect(formatDollars(0n)).toBe('0');
    expect(formatDollars(-1n)).toBe('-0.000001');
    expect(toDollars(123_456_789n)).toBe(123.456789);
  });

  it('parses dollars without floats and refuses fractions of a micro-dollar', () => {
    expect(parseDollars(0.1)).toBe(100_000n);
    expect(parseDollars('5')).toBe(5_000_000n);
    expect(parseDollars(19.99)).toBe(19_990_000n);
    expect(parseDollars('0.0000001')).toBeNull();
    expect(parseDollars(1e-7)).toBeNull();
    expect(parseDollars(-1)).toBeNull();
    expect(parseDollars('1e3')).toBeNull();
    expect(parseDollars(Number.NaN)).toBeNull();
    expect(parseDollars('9999999999999')).toBeNull();
  });
});

describe('money round trip', () => {
  it('parses back every amount it formats, and formats back every amount it parses', () => {
    const max = 10n ** 18n - 1n; // 12 integer digits, the most parseDollars accepts
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max }), (micros) => {
        expect(parseDollars(formatDollars(micros))).toBe(micros);
        expect(formatDollars(-micros)).toBe(micros === 0n ? '0' : `-${formatDollars(micros)}`);
      }),
    );
    fc.assert(
      fc.property(fc.stringMatching(/^(0|[1-9]\d{0,11})(\.\d{1,6})?$/), (text) => {
        const micros = parseDollars(text);
        expect(micros).not.toBeNull();
        expect(Number(formatDollars(micros!))).toBe(Number(text));
      }),
    );
  });
});
