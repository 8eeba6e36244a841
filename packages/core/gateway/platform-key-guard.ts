import type { Transform } from 'node:stream';
import zlib from 'node:zlib';
import type { SecretRedactor } from './redaction.js';

/**
 * What keeps the operator's platform key from reaching a caller through an upstream's answer, beside
 * the body redaction (redactingStream): the answer's headers, the redirect targets built from the
 * request URL, and compressed bodies, which a byte-level redaction cannot see into.
 */

/**
 * Every header value with the key (and any piece of it, see SecretRedactor) redacted; Location and
 * Content-Location also lose the key's query parameter.
 */
export function redactResponseHeaders(
  headers: Record<string, string | string[]>,
  redactor: SecretRedactor,
  queryParameter: string | null,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    const clean = (text: string) =>
      redactor.redactText(lower === 'location' || lower === 'content-location' ? withoutParameter(text, queryParameter) : text);
    out[name] = Array.isArray(value) ? value.map(clean) : clean(value);
  }
  return out;
}

/** A URL (absolute or relative) without the named query parameter; anything unparsable is left to the redaction. */
function withoutParameter(target: string, parameter: string | null): string {
  if (parameter === null || !target.includes('?')) return target;
  const at = target.indexOf('?');
  const hash = target.indexOf('#', at);
  const query = target.slice(at + 1, hash === -1 ? undefined : hash);
  const kept = query.split('&').filter((pair) => {
    const name = pair.split('=')[0] ?? '';
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // A malformed name is compared as it is.
    }
    return decoded !== parameter;
  });
  return `${target.slice(0, at)}${kept.length ? `?${kept.join('&')}` : ''}${hash === -1 ? '' : target.slice(hash)}`;
}

const DECODERS: Record<string, (() => Transform) | undefined> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
  zstd: typeof zlib.createZstdDecompress === 'function' ? () => zlib.createZstdDecompress() : undefined,
};

/**
 * How to read an answer's body before redacting it: null for an uncompressed body, a decoder for
 * gzip, deflate, br and zstd, or 'unsupported' for anything else (several encodings, an unknown one),
 * which a platform-key call refuses rather than pass through unread.
 */
export function bodyDecoder(contentEncoding: string | string[] | undefined): Transform | null | 'unsupported' {
  if (contentEncoding === undefined) return null;
  const value = (Array.isArray(contentEncoding) ? contentEncoding.join(',') : contentEncoding).trim().toLowerCase();
  if (value === '' || value === 'identity') return null;
  const make = DECODERS[value];
  return make ? make() : 'unsupported';
}
