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

/**
 * JSON bodies are parsed by Fastify's own parser (prototype-poisoning checks included) after a
 * nesting-depth check: a body nested deeper than `maxDepth` is a 400 that names the limit, before
 * anything recursive (validation, storage, workflow history) sees it. Size is capped by bodyLimit (413).
 */
export function limitJsonBodies(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (nestingDeeperThan(text, maxDepth)) {
      done(
        new PlatformError('validation_failed', `Request body nests deeper than ${maxDepth} levels`, {
          hint: `Flatten the JSON: objects and arrays may nest at most ${maxDepth} levels (JSON_MAX_DEPTH).`,
        }),
        undefined,
      );
      return;
    }
    parse(request, text, done);
  });
}
