import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import { PlatformError } from '#core/platform';

/**
 * How deep a JSON body nests at most, found in one pass over the text (brackets inside strings do
 * not count). Stops as soon as `limit` is passed.
 */
export function nestingDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > limit) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return false;
}

/** Text Postgres cannot store: U+0000 (refused by text and jsonb) and lone UTF-16 surrogates (refused by jsonb). */
export interface UnstorableText {
  /** Where it is, e.g. `resultData.items[2].note`, or `a key of resultData` for an object key. */
  where: string;
  problem: 'nul' | 'lone_surrogate';
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const child = (path: string, key: string) => {
  const segment = IDENTIFIER.test(key) ? key : `[${JSON.stringify(key)}]`;
  return path === '' ? segment : IDENTIFIER.test(key) ? `${path}.${segment}` : `${path}${segment}`;
};
// A high surrogate not followed by a low one, or a low one not preceded by a high one (code units:
// no `u` flag). String.prototype.isWellFormed says the same, but is not in the compiler's lib yet.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const problemOf = (text: string): UnstorableText['problem'] | null =>
  text.includes('\u0000') ? 'nul' : LONE_SURROGATE.test(text) ? 'lone_surrogate' : null;

/**
 * The first string in a parsed value (object keys included) that Postgres would refuse, with its
 * path from `root`; null when every string can be stored. Depth is bounded by the caller (JSON_MAX_DEPTH).
 */
export function findUnstorableText(value: unknown, root = ''): UnstorableText | null {
  if (typeof value === 'string') {
    const problem = problemOf(value);
    return problem === null ? null : { where: root || 'the value', problem };
  }
  if (value === null || typeof value !== 'object' || Buffer.isBuffer(value) || typeof (value as { pipe?: unknown }).pipe === 'function') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorableText(value[i], `${root}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  for (const [key, item] of Object.entries(value)) {
    const problem = problemOf(key);
    if (problem !== null) return { where: root === '' ? 'a key of the object' : `a key of ${root}`, problem };
    const found = findUnstorableText(item, child(root, key));
    if (found) return found;
  }
  return null;
}

/** The 400 for text that cannot be stored, naming where it is. */
export function unstorableTextError(part: 'body' | 'query' | 'path', found: UnstorableText): PlatformError {
  if (found.problem === 'nul') {
    return new PlatformError(
      'validation_failed',
      `Invalid request ${part}: ${found.where} contains the NUL character (\\u0000), which text cannot hold`,
      {
        hint: `Remove \\u0000 from ${found.where} (request ${part}).`,
      },
    );
  }
  return new PlatformError(
    'validation_failed',
    `Invalid request ${part}: ${found.where} contains a lone UTF-16 surrogate (\\uD800-\\uDFFF without its pair), which is not valid Unicode`,
    {
      hint: `Send well-formed Unicode in ${found.where} (request ${part}): a high surrogate \\uD800-\\uDBFF must be followed by a low one \\uDC00-\\uDFFF; remove or replace an unpaired one.`,
    },
  );
}

// An escape that may decode to text Postgres refuses: `\u0000` or a surrogate. Without one in the
// body's text no parsed string can hold either (raw control characters are not valid JSON, and the
// bytes were checked to be UTF-8), so the common body is not walked at all.
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/;

/**
 * JSON bodies are parsed by Fastify's own parser (prototype-poisoning checks included) after two
 * checks on the text: it must be UTF-8 (bytes that are not would be replaced with U+FFFD silently),
 * and nested at most `maxDepth` deep, before anything recursive (validation, storage, workflow
 * history) sees it. After parsing, a string anywhere in the body (object keys included) that
 * Postgres cannot store (U+0000, a lone surrogate) is a 400 naming its path: one check for every
 * JSON route, before a handler could hand it to a workflow that would fail on it for good. Size is
 * capped by bodyLimit (413).
 */
export function limitJsonBodies(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    if (!isUtf8(bytes)) {
      done(
        new PlatformError('validation_failed', 'Request body is not valid UTF-8', {
          hint: 'Encode the JSON body as UTF-8 (a lone surrogate cannot be encoded at all: escape or remove it).',
        }),
        undefined,
      );
      return;
    }
    const text = bytes.toString('utf8');
    if (nestingDeeperThan(text, maxDepth)) {
      done(
        new PlatformError('validation_failed', `Request body nests deeper than ${maxDepth} levels`, {
          hint: `Flatten the JSON: objects and arrays may nest at most ${maxDepth} levels (JSON_MAX_DEPTH).`,
        }),
        undefined,
      );
      return;
    }
    parse(request, text, (error, value) => {
      if (error) return done(error, undefined);
      const found = SUSPECT_ESCAPE.test(text) ? findUnstorableText(value) : null;
      if (found) return done(unstorableTextError('body', found), undefined);
      done(null, value);
    });
  });
}
