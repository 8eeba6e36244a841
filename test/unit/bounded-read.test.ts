import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readBounded } from '#core/platform';
import { readExcerpt, SecretRedactor, UPSTREAM_EXCERPT_BYTES } from '#core/gateway';

/** A body of `chunks` chunks of 64 KB that counts how many were pulled from it. */
function countingBody(chunks: number) {
  const state = { pulled: 0, destroyed: false };
  const body = new Readable({
    read() {
      if (state.pulled >= chunks) return void this.push(null);
      state.pulled += 1;
      this.push(Buffer.alloc(64 * 1024, 120));
    },
    destroy(error, callback) {
      state.destroyed = true;
      callback(error);
    },
  });
  return { body, state };
}

describe('bodies written by third parties are read only as far as they are kept', () => {
  it('readBounded stops at its limit and releases the stream (a 1 GB body is not read)', async () => {
    const { body, state } = countingBody(16_384);
    const { bytes, truncated } = await readBounded(body, 1_200);
    expect(bytes.length).toBe(1_200);
    expect(truncated).toBe(true);
    expect(state.pulled).toBeLessThan(4);
    expect(state.destroyed).toBe(true);
  });

  it('readBounded returns a short body whole', async () => {
    const { bytes, truncated } = await readBounded(Readable.from([Buffer.from('short')]), 1_200);
    expect(bytes.toString()).toBe('short');
    expect(truncated).toBe(false);
  });

  it('an upstream error excerpt is redacted before it is cut, and reads no more than it needs', async () => {
    const secret = 'sk_9Hq2Zt9RwX4mLc8VbN3k';
    const page = Buffer.from(`${'x'.repeat(UPSTREAM_EXCERPT_BYTES - 10)}${secret}${'y'.repeat(100_000)}`);
    const excerpt = await readExcerpt(Readable.from([page.subarray(0, 1_000), page.subarray(1_000)]), new SecretRedactor([secret]));
    expect(excerpt).toBe(`${'x'.repeat(UPSTREAM_EXCERPT_BYTES - 10)}[redacted]`);
    expect(excerpt).not.toContain(secret.slice(0, 8));
  });
});
