import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { proxyTarget, upstreamUrl } from '#core/gateway';

// Characters that matter to path resolution, mixed with ordinary ones.
const pathText = fc
  .array(
    fc.constantFrom(
      '/',
      '.',
      '..',
      '%2e',
      '%2E',
      '%2f',
      '%5c',
      '%00',
      '%',
      '%zz',
      '\\',
      '\t',
      '\n',
      ' ',
      '?',
      '#',
      'a',
      'b',
      '~',
      ';',
      '@',
      ':',
      '%20',
      '%41',
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(''));

describe('proxy path remainder', () => {
  it('either is refused or reaches a URL on the API origin, under its base path', () => {
    for (const base of ['https://api.example.com', 'https://api.example.com/v1', 'https://api.example.com/v1/']) {
      const basePath = new URL(base).pathname.replace(/\/+$/, '');
      fc.assert(
        fc.property(pathText, (rest) => {
          let target: ReturnType<typeof proxyTarget>;
          let url: ReturnType<typeof upstreamUrl>;
          try {
            target = proxyTarget(`/api/v1/proxy/x/${rest}`, 4);
            url = upstreamUrl(base, target);
          } catch (error) {
            expect((error as Error).message).toMatch(/^Invalid proxy path/);
            return;
          }
          expect(url.origin).toBe('https://api.example.com');
          const resolved = new URL(url.path, url.origin);
          expect(resolved.origin).toBe(url.origin);
          expect(
            resolved.pathname === (basePath || '/') || resolved.pathname.startsWith(`${basePath}/`),
            `${JSON.stringify(rest)} -> ${resolved.pathname}`,
          ).toBe(true);
        }),
        { numRuns: 500 },
      );
    }
  });

  it('refuses a remainder the URL parser cannot resolve against the origin, as a path error', () => {
    // A newline or tab is dropped by the URL parser, so "/\n/" becomes "//", a host-relative URL with no host.
    for (const path of ['/\n/', '/\t/x', '/\r\n/x']) {
      expect(() => upstreamUrl('https://api.example.com', { path, query: null }), JSON.stringify(path)).toThrow(
        /^Invalid proxy path: it leaves the API base URL$/,
      );
    }
  });

  it('splits the query off at the first "?" and keeps both parts byte for byte', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9/~-]{0,20}$/), fc.option(fc.string({ maxLength: 20 }), { nil: null }), (path, query) => {
        const clean = `/${path}`.replace(/\/{2,}/g, '/');
        const target = proxyTarget(`/api/v1/proxy/x${clean}${query === null ? '' : `?${query}`}`, 4);
        expect(target).toEqual({ path: clean, query });
      }),
    );
  });
});
