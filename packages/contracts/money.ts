/**
 * Money is integer micro-dollars (bigint) everywhere except at the HTTP edge, where it is written as
 * dollars: a JSON number in bodies, a decimal string in headers. No float ever takes part in arithmetic.
 */
export const MICROS_PER_DOLLAR = 1_000_000n;

export const PRICES = {
  instructions: 10_000n,
  cookbookDetails: 5_000n,
  docSection: 5_000n,
} as const;

/** Exact decimal string, trailing zeros trimmed: 10000n -> "0.01", 1500000n -> "1.5", 0n -> "0". */
export function formatDollars(micros: bigint): string {
  const negative = micros < 0n;
  const abs = negative ? -micros : micros;
  const whole = abs / MICROS_PER_DOLLAR;
  const frac = (abs % MICROS_PER_DOLLAR).toString().padStart(6, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

/** Dollars as a JSON number for response bodies (display only; the decimal string is exact). */
export function toDollars(micros: bigint): number {
  return Number(formatDollars(micros));
}

const DECIMAL = /^(\d{1,12})(?:\.(\d{1,6}))?$/;

/**
 * Parses a dollar amount given as a JSON number or string into micro-dollars. Returns null for
 * anything that is not a non-negative decimal with at most six fractional digits (no exponents,
 * no fractions of a micro-dollar, at most 12 integer digits).
 */
export function parseDollars(value: number | string): bigint | null {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return null;
    text = String(value);
  } else {
    text = value.trim();
  }
  const match = DECIMAL.exec(text);
  if (!match) return null;
  const [, whole = '0', frac = ''] = match;
  return BigInt(whole) * MICROS_PER_DOLLAR + BigInt(frac.padEnd(6, '0'));
}
