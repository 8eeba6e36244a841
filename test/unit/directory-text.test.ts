import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Callability } from '#contracts/directory';
import {
  callabilityInstructions,
  generateInstructions,
  instructionsFooter,
  mcpInstructions,
  plainText,
  similarity,
  wordSimilarityOf,
} from '#core/directory';

describe('plainText', () => {
  it('turns markdown and HTML into one line of text', () => {
    expect(plainText('# Title\n\nSome **bold** and _italic_ text with a [link](https://x.example) and `code`.')).toBe(
      'Title Some bold and italic text with a link and code.',
    );
    expect(plainText('<p>Fish &amp; chips&#39;s <b>menu</b></p><script>alert(1)</script><!-- hidden -->')).toBe("Fish & chips's menu");
    expect(plainText('- one\n- two\n> quoted | cell')).toBe('one two quoted cell');
    expect(plainText('```\nconst x = 1;\n```\nafter')).toBe('after');
    expect(plainText(undefined)).toBe('');
    expect(plainText(42)).toBe('');
  });

  it('cuts long text on a word boundary with an ellipsis, never above the limit', () => {
    const text = plainText('word '.repeat(100), 50);
    expect(text.length).toBeLessThanOrEqual(50);
    expect(text.endsWith('word…')).toBe(true);
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), fc.integer({ min: 2, max: 300 }), (input, max) => {
        expect(plainText(input, max).length).toBeLessThanOrEqual(max);
      }),
    );
  });
});

describe('generated instructions', () => {
  const source = {
    id: 'weather',
    name: 'Weather',
    provider: 'example.com',
    service: null,
    description: 'Forecasts.',
    baseUrl: 'https://api.example.com/v1',
    authScheme: { type: 'apiKey' as const, in: 'query' as const, name: 'appid' },
    categories: ['weather'],
    endpoints: [
      { method: 'GET', path: '/forecast/{city}', summary: 'A forecast', params: [{ name: 'units', in: 'query', required: true, description: '' }] },
      { method: 'POST', path: '/alerts', summary: '' },
    ],
    endpointCount: 20,
  };

  it('send every call through the metered proxy, with an example using a GET endpoint', () => {
    const text = generateInstructions(source);
    expect(text).toContain('`GET /api/v1/proxy/weather/forecast/{city}` — A forecast');
    expect(text).toContain('Parameters: `units` (query, required)');
    expect(text).toContain('18 more endpoints: `GET /api/v1/apis/weather` lists them.');
    expect(text).toContain('API key in the query `appid`');
    expect(text).toContain('curl -X GET "$BASE_URL/api/v1/proxy/weather/forecast/<city>?units=<units>"');
    expect(text).not.toMatch(/\$\d/); // the price is the footer's, added live
  });

  const prices = (priceMicros: bigint, byokPriceMicros: bigint | null, rules: { method: string; path: string; priceMicros: bigint }[] = []) => ({
    priceMicros,
    byokPriceMicros,
    rules,
  });
  const needsKey: Callability = {
    state: 'needs_key',
    reason: 'key_required',
    hint: 'Connect your own API key once with POST /api/v1/connect/weather',
  };
  const noAuth: Callability = { state: 'ready', reason: 'no_auth' };

  it('footer shows the live price, and the own-key price only when it differs', () => {
    expect(instructionsFooter('weather', prices(2_500n, null), needsKey)).toContain('Each proxied call costs $0.0025, debited');
    expect(instructionsFooter('weather', prices(2_500n, 2_500n), needsKey)).not.toContain('own key)');
    expect(instructionsFooter('weather', prices(2_500n, 1_000n), needsKey)).toContain('$0.0025 ($0.001 when you connect your own key)');
    expect(instructionsFooter('weather', prices(2_500n, null), needsKey)).toContain('`409` `connection_required`');
  });

  it('footer lists the per-path prices in the order the proxy tries them, through both doors', () => {
    const rules = [
      { method: 'GET', path: '/dear', priceMicros: 2_000_000n },
      { method: '*', path: '/bulk/*', priceMicros: 50_000n },
    ];
    for (const door of ['rest', 'mcp'] as const) {
      const footer = instructionsFooter('weather', prices(1_000n, null, rules), noAuth, door);
      expect(footer).toContain('unless a rule below matches');
      expect(footer).toContain('- `GET /dear`: $2 per call\n- `* /bulk/*`: $0.05 per call');
    }
  });

  it('an API that needs no credentials is never told to connect a key first', () => {
    for (const door of ['rest', 'mcp'] as const) {
      const text = callabilityInstructions('weather', noAuth, door) + instructionsFooter('weather', prices(1_000n, null), noAuth, door);
      expect(text).toContain('needs no credentials');
      expect(text).not.toMatch(/connection_required|connect your own key|connect it/i);
    }
  });

  it('through MCP: call_api and its arguments, no curl, proxy URL, route or header', () => {
    const stored = generateInstructions(source);
    const text =
      mcpInstructions(stored, source, needsKey) +
      callabilityInstructions('weather', needsKey, 'mcp') +
      instructionsFooter('weather', prices(2_500n, null), needsKey, 'mcp');
    expect(text).toContain('call_api(apiId, method, path, query, body, maxCost)');
    expect(text).toContain('`GET /forecast/{city}` — A forecast');
    expect(text).toContain('Parameters: `units` (query, required)');
    expect(text).toContain('18 more endpoints: get_api (id: "weather") lists them.');
    expect(text).toContain('"query": {\n    "units": "<units>"\n  }');
    expect(text).toContain('request_connection (apiId: "weather"');
    expect(text).toContain('409 `max_cost_exceeded`');
    for (const rest of [/curl/i, /\/api\/v1/, /X-Max-Cost/i, /X-Service/i, /Authorization/, /Bearer/, /Retry-After/, /\$BASE_URL/])
      expect(text).not.toMatch(rest);
  });
});

describe('trigram similarity (pg_trgm semantics)', () => {
  it('is 1 for the same words, 0 for nothing shared, and ignores case and punctuation', () => {
    expect(similarity('weather', 'weather')).toBe(1);
    expect(similarity('Weather!', 'weather')).toBe(1);
    expect(similarity('abc', 'xyz')).toBe(0);
    expect(similarity('', '')).toBe(0);
    // "word" has 5 trigrams ("  w", " wo", "wor", "ord", "rd "), "words" 6; they share 4: 4 / 7 as float4.
    expect(similarity('word', 'words')).toBe(Math.fround(4 / 7));
  });

  it('is symmetric and within [0, 1]; word_similarity is at least similarity and 1 for a contained word', () => {
    const words = fc
      .array(fc.constantFrom('weather', 'forecast', 'map', 'maps', 'geo', 'code', 'coder', 'api', 'x'), { maxLength: 5 })
      .map((w) => w.join(' '));
    fc.assert(
      fc.property(words, words, (a, b) => {
        const s = similarity(a, b);
        expect(s).toBe(similarity(b, a));
        expect(s).toBeGreaterThanOrEqual(0);
        expect(s).toBeLessThanOrEqual(1);
        const w = wordSimilarityOf(a, b);
        expect(w).toBeGreaterThanOrEqual(s);
        expect(w).toBeLessThanOrEqual(1);
        if (a.length > 0 && !a.includes(' ') && b.split(' ').includes(a)) expect(w).toBe(1);
      }),
    );
  });
});
