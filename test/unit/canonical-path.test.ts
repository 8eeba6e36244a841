import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { MeteredApi } from '#db/metered-apis';
import { canonicalPath, methodsServed, priceOf, proxyTarget, upstreamUrl } from '#core/gateway';

// The path canonicaliser and the price of a path, fuzzed against a model of the most lenient server
// an upstream may run: it drops path parameters (Tomcat, Jetty, Spring), decodes percent-escapes,
// drops trailing dots and spaces (IIS), folds case (Express, IIS) and resolves dot segments.
// FUZZ_RUNS raises the number of cases (scripts/fuzz.sh); npm test runs a bounded one.
const RUNS = Number(process.env.FUZZ_RUNS ?? 500);
/** A long run (test:fuzz) gets the time it needs. */
const TIMEOUT = 30_000 + RUNS * 20;

function lenientSegments(path: string): string[] {
  const out: string[] = [];
  for (const raw of path.split('/').slice(1)) {
    let segment = raw.split(/;|%3b/i)[0] ?? '';
    try {
      segment = decodeURIComponent(segment);
    } catch {
      // A server that cannot decode it takes it as it is.
    }
    segment = segment.split(';')[0] ?? '';
    if (!/^[. ]+$/.test(segment)) segment = segment.replace(/[. ]+$/, '');
    else segment = segment.replace(/ +$/, '').replace(/^\.{3,}$/, '..');
    segment = segment.toLowerCase();
    if (segment === '.' || segment === '') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return out;
}

/** What the caller may type in a segment: letters, dots, semicolons, escapes (some of them of dots and semicolons), spaces. */
const segmentPart = fc.constantFrom(
  'a',
  'B',
  'x',
  'premium',
  'PREMIUM',
  'Premium',
  '.',
  '..',
  ';',
  ';v=1',
  '%2e',
  '%2E',
  '%3b',
  '%3B',
  '%20',
  '%70',
  '%50',
  '~',
  '-',
  '_',
  '%41',
  'report',
  '.json',
);
const segment = fc.array(segmentPart, { minLength: 1, maxLength: 4 }).map((parts) => parts.join(''));
const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((segments) => `/${segments.join('/')}`);

const BASE = { origin: 'https://upstream.example', hostname: 'upstream.example', basePath: '/app/v1' };

function accepted(rawPath: string): { path: string; query: string | null } | null {
  try {
    return proxyTarget(rawPath, 0);
  } catch (error) {
    expect((error as { code?: string }).code).toBe('validation_failed');
    return null;
  }
}

const api = (rules: MeteredApi['pricingRules']): MeteredApi =>
  ({
    id: 'fuzz.example',
    name: 'Fuzz',
    baseUrl: 'https://upstream.example/app/v1',
    authScheme: { type: 'none' },
    oauth: null,
    oauthProvider: null,
    keyDocsUrl: null,
    priceMicros: 1_000n,
    byokPriceMicros: null,
    pricingRules: rules,
    platformKeyEncrypted: null,
    source: 'operator',
  }) as MeteredApi;

describe('the proxy path canonicaliser (property-based)', () => {
  it('never lets an accepted path leave the base path, as the most lenient server reads it', { timeout: TIMEOUT }, () => {
    fc.assert(
      fc.property(path, (raw) => {
        const target = accepted(raw);
        if (!target) return;
        const forwarded = upstreamUrl(BASE, { path: canonicalPath(target.path), query: null }).path;
        const served = lenientSegments(forwarded);
        expect(served.slice(0, 2), `${raw} -> ${forwarded}`).toEqual(['app', 'v1']);
      }),
      { numRuns: RUNS },
    );
  });

  it('prices every accepted spelling of a priced path at the rule, however the lenient server spells it back', { timeout: TIMEOUT }, () => {
    const premium = api([{ method: 'GET', path: '/premium*', priceMicros: 50_000n }]);
    fc.assert(
      fc.property(path, (raw) => {
        const target = accepted(raw);
        if (!target) return;
        const canonical = canonicalPath(target.path);
        const served = lenientSegments(canonical);
        if (served[0]?.startsWith('premium'))
          expect(priceOf(premium, 'GET', canonical, false), `${raw} is served as /${served.join('/')}`).toBe(50_000n);
      }),
      { numRuns: RUNS },
    );
  });

  it('prices a request as the most expensive method it may be served as', { timeout: TIMEOUT }, () => {
    const rules = api([{ method: 'GET', path: '/premium*', priceMicros: 50_000n }]);
    fc.assert(
      fc.property(
        fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
        fc.constantFrom('X-HTTP-Method-Override', 'x-http-method', 'X-Method-Override'),
        fc.constantFrom('GET', 'get', 'Get'),
        (method, header, override) => {
          expect(priceOf(rules, methodsServed(method, [header, override], null), '/premium/x', false)).toBe(50_000n);
          expect(priceOf(rules, methodsServed(method, [], `a=1&_method=${override}`), '/premium/x', false)).toBe(50_000n);
          expect(priceOf(rules, methodsServed(method, [], null), '/premium/x', false)).toBe(1_000n);
        },
      ),
      { numRuns: 50 },
    );
  });
});
