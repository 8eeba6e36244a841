import { Transform } from 'node:stream';

/**
 * Keeping secrets the platform sends upstream (the operator's platform keys; later OAuth tokens) out
 * of everything a caller receives: proxied bodies, error excerpts, headers, redirect targets and MCP
 * tool results.
 *
 * The guarantee is about pieces, not only whole secrets: no run of MIN_LEAK or more consecutive
 * characters of a secret reaches a caller, in any of the forms in which the platform sends it (raw,
 * percent-encoded, form-encoded, base64 as in basic auth, JSON-escaped), wherever the answer is cut
 * (an upstream quoting only the first few dozen characters of a request line, an excerpt cut at a
 * size) and however it is chunked. Matching every MIN_LEAK-byte window of every form gives exactly
 * that: any longer run contains such a window, and every byte of a matching window is masked.
 * Masked runs become "[redacted]". A secret shorter than MIN_LEAK is matched whole.
 */
export const MIN_LEAK = 8;

const MARKER = Buffer.from('[redacted]');
const EMPTY = Buffer.alloc(0);

/** The byte forms in which a secret may travel upstream, and so be echoed back. */
export function secretForms(secret: string): Buffer[] {
  const forms = new Set<string>([secret]);
  const percent = encodeURIComponent(secret);
  forms.add(percent);
  forms.add(percent.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()));
  forms.add(percent.replace(/%20/g, '+'));
  const json = JSON.stringify(secret).slice(1, -1);
  forms.add(json);
  // Basic auth sends base64("user:pass"), or base64("key:") for a bare key (see upstreamAuth).
  forms.add(Buffer.from(secret.includes(':') ? secret : `${secret}:`).toString('base64'));
  // The secret inside any longer base64 text, at each of the three alignments, in both alphabets:
  // the characters that also depend on neighbouring bytes are dropped at each end.
  const length = Buffer.byteLength(secret);
  for (let offset = 0; offset < 3; offset += 1) {
    const encoded = Buffer.concat([Buffer.alloc(offset), Buffer.from(secret)]).toString('base64');
    // Characters wholly made of the secret's bits: from ceil(8·offset / 6) to floor(8·(offset + length) / 6).
    const inner = encoded.slice(Math.ceil((4 * offset) / 3), Math.floor((4 * (offset + length)) / 3));
    if (inner.length > 0) {
      forms.add(inner);
      forms.add(inner.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  }
  return [...forms].filter((form) => form.length > 0).map((form) => Buffer.from(form));
}

/**
 * Finds and masks the forms of a set of secrets in bytes. Built once per secret set (the edge keeps
 * one per platform key); `redact`, `redactText` and `stream` are safe to use concurrently.
 */
export class SecretRedactor {
  /** Every MIN_LEAK-byte window of every long enough form, as latin1 strings. */
  private readonly windows = new Set<string>();
  /** Whether a window starts with these two bytes: a cheap first look before the set. */
  private readonly starts = new Uint8Array(65_536);
  /** Forms shorter than MIN_LEAK, matched whole. */
  private readonly shortForms: Buffer[] = [];

  constructor(secrets: readonly string[]) {
    for (const secret of secrets) {
      if (secret.length === 0) continue;
      for (const form of secretForms(secret)) {
        if (form.length < MIN_LEAK) {
          this.shortForms.push(form);
          continue;
        }
        for (let i = 0; i + MIN_LEAK <= form.length; i += 1) {
          this.windows.add(form.toString('latin1', i, i + MIN_LEAK));
          this.starts[(form[i]! << 8) | form[i + 1]!] = 1;
        }
      }
    }
  }

  /**
   * Marks the bytes of `data` that belong to a match, in `mask` (created on the first match when
   * null). Returns the mask, or null when nothing matched and none was given.
   */
  mark(data: Buffer, mask: Uint8Array | null = null): Uint8Array | null {
    const last = data.length - MIN_LEAK;
    for (let i = 0; i <= last; i += 1) {
      if (this.starts[(data[i]! << 8) | data[i + 1]!] === 0) continue;
      if (!this.windows.has(data.toString('latin1', i, i + MIN_LEAK))) continue;
      mask ??= new Uint8Array(data.length);
      mask.fill(1, i, i + MIN_LEAK);
    }
    for (const form of this.shortForms) {
      for (let at = data.indexOf(form); at !== -1; at = data.indexOf(form, at + 1)) {
        mask ??= new Uint8Array(data.length);
        mask.fill(1, at, at + form.length);
      }
    }
    return mask;
  }

  /** `data` with every match replaced by "[redacted]" (the same buffer when nothing matched). */
  redact(data: Buffer): Buffer {
    const mask = this.mark(data);
    return mask ? masked(data, mask, 0, data.length, false).out : data;
  }

  redactText(text: string): string {
    const data = Buffer.from(text);
    const out = this.redact(data);
    return out === data ? text : out.toString('utf8');
  }

  /**
   * A stream that redacts across chunk boundaries: it holds back the last MIN_LEAK - 1 bytes (a
   * window may still end in the next chunk) with what earlier windows already marked of them.
   * Whole and chunked, the output is the same as `redact` of the whole body.
   */
  stream(): Transform {
    let held: Buffer = EMPTY;
    let heldMask: Uint8Array | null = null;
    let inRun = false;
    const keep = MIN_LEAK - 1;
    return new Transform({
      transform: (chunk: Buffer, _encoding, callback) => {
        const data = held.length > 0 ? Buffer.concat([held, chunk]) : chunk;
        let mask: Uint8Array | null = null;
        if (heldMask) {
          mask = new Uint8Array(data.length);
          mask.set(heldMask);
        }
        mask = this.mark(data, mask);
        const cut = Math.max(0, data.length - keep);
        held = data.subarray(cut);
        if (!mask) {
          heldMask = null;
          inRun = false;
          callback(null, data.subarray(0, cut));
          return;
        }
        const emitted = masked(data, mask, 0, cut, inRun);
        inRun = emitted.endsInRun;
        heldMask = mask.slice(cut);
        if (!heldMask.includes(1)) heldMask = null;
        callback(null, emitted.out);
      },
      flush: (callback) => {
        if (!heldMask) {
          callback(null, held);
          return;
        }
        callback(null, masked(held, heldMask, 0, held.length, inRun).out);
      },
    });
  }
}

/**
 * `data[from, to)` with each masked run replaced by the marker; a run that continues one already
 * replaced in an earlier piece (`inRun`) is dropped without a second marker.
 */
function masked(data: Buffer, mask: Uint8Array, from: number, to: number, inRun: boolean): { out: Buffer; endsInRun: boolean } {
  const parts: Buffer[] = [];
  let i = from;
  let running = inRun;
  while (i < to) {
    if (mask[i]) {
      let j = i;
      while (j < to && mask[j]) j += 1;
      if (!(running && i === from)) parts.push(MARKER);
      running = true;
      i = j;
    } else {
      let j = i;
      while (j < to && !mask[j]) j += 1;
      parts.push(data.subarray(i, j));
      running = false;
      i = j;
    }
  }
  return { out: parts.length === 1 ? parts[0]! : Buffer.concat(parts), endsInRun: to > from ? running : inRun };
}
