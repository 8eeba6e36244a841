import type { Readable } from 'node:stream';

/**
 * Reads at most `maxBytes` of a body someone else wrote (an upstream's error page, a webhook
 * endpoint's answer), then destroys the stream, so nothing a third party sends is ever held in
 * memory whole. A body that breaks off yields what arrived.
 */
export async function readBounded(body: Readable | AsyncIterable<Uint8Array>, maxBytes: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  try {
    for await (const chunk of body) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      chunks.push(buffer);
      size += buffer.length;
      if (size >= maxBytes) {
        truncated = size > maxBytes;
        break;
      }
    }
  } catch {
    // What arrived is enough.
  } finally {
    (body as { destroy?: () => void }).destroy?.();
  }
  return { bytes: Buffer.concat(chunks).subarray(0, maxBytes), truncated };
}
