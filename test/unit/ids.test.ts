import { describe, expect, it } from 'vitest';
import { timeOrderedUuid } from '#core/platform';
import { usageEventSchema } from '#db/usage';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const timeOf = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

describe('timeOrderedUuid (UUID version 7, for rows written on every call)', () => {
  it('is a version 7 UUID of RFC 9562 whose first 48 bits are the time in milliseconds', () => {
    const now = Date.now();
    const id = timeOrderedUuid(now);
    expect(id).toMatch(V7);
    expect(timeOf(id)).toBe(now);
    // The earliest and a far later time keep the layout.
    expect(timeOrderedUuid(0)).toMatch(/^00000000-0000-7/);
    expect(timeOf(timeOrderedUuid(2 ** 48 - 1))).toBe(2 ** 48 - 1);
  });

  it('sorts by time as text (the order Postgres indexes it in), and never repeats', () => {
    const ids = Array.from({ length: 50_000 }, (_, i) => timeOrderedUuid(1_800_000_000_000 + Math.floor(i / 10)));
    expect(new Set(ids).size).toBe(ids.length);
    const byTime = ids.map(timeOf);
    const sorted = [...ids].sort();
    expect(sorted.map(timeOf)).toEqual([...byTime].sort((a, b) => a - b));
    // The 74 random bits differ between ids of the same millisecond.
    expect(new Set(ids.slice(0, 10).map((id) => id.slice(15))).size).toBe(10);
  });

  it('passes the usage event schema, as queue jobs carry it', () => {
    const id = timeOrderedUuid();
    const event = usageEventSchema.parse({
      id,
      accountId: timeOrderedUuid(),
      keyId: null,
      apiId: 'example.com',
      item: 'proxy',
      status: 200,
      latencyMs: 1,
      bytesIn: 0,
      bytesOut: 0,
      costMicros: '1',
      chargeId: timeOrderedUuid(),
      at: new Date().toISOString(),
    });
    expect(event.id).toBe(id);
  });
});
