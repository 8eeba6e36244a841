import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CALLABILITY_REASONS } from '#contracts/directory';
import { callabilityAdvice, isDeveloperWorded, peopleError, peopleText } from '#dashboard/wording';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DASHBOARD_SRC = join(ROOT, 'apps/dashboard/src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx)$/.test(entry.name) ? [path] : [];
  });
}

/**
 * The dashboard's source without what no person reads: comments, the typed client's route
 * arguments (`client.GET('/api/v1/…')`) and response types (`Answer<'/api/v1/…'>`).
 */
function readableSource(path: string): string {
  return readFileSync(path, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|\s)\/\/.*$/gm, '$1')
    .replace(/client\.(?:GET|POST|PUT|PATCH|DELETE)\(\s*'[^']*'/g, 'client.CALL(')
    .replace(/Answer<\s*'[^']*'/g, 'Answer<ROUTE');
}

/**
 * Addresses the dashboard builds on purpose, each for a reason a person never reads as a message:
 * the checklist's ready-made commands (they are the thing to copy), the statement's CSV download
 * link, and the helper that makes an EventSource's address.
 */
const ALLOWED = [
  { file: 'first-run.tsx', text: '${origin}/api/v1/proxy/' },
  { file: 'first-run.tsx', text: '${origin}/api/v1/discover?q=' },
  { file: 'pages/Statement.tsx', text: '`/api/v1/statement?' },
  { file: 'api.ts', text: "path.startsWith('/api/')" },
  { file: 'api.ts', text: '`/api/v1${path}`' },
];

const ROUTE = /\b(?:GET|POST|PUT|PATCH|DELETE)\s+\/[\w{]|\/api\/(?:v1|auth)\b/g;

/** Every setting the operator can set, as .env.example lists them (set or commented out). */
function settingNames(): string[] {
  const names = new Set<string>();
  for (const line of readFileSync(join(ROOT, '.env.example'), 'utf8').split('\n')) {
    const match = /^#?\s*([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)=/.exec(line);
    if (match?.[1]) names.add(match[1]);
  }
  return [...names];
}

describe("the dashboard's words", () => {
  const files = sourceFiles(DASHBOARD_SRC);

  it('name no REST route in anything a person reads', () => {
    expect(files.length).toBeGreaterThan(20);
    const found: string[] = [];
    for (const path of files) {
      const name = relative(DASHBOARD_SRC, path);
      let text = readableSource(path);
      for (const allowed of ALLOWED.filter((entry) => entry.file === name)) {
        expect(text, `${name} still holds ${allowed.text} (update ALLOWED)`).toContain(allowed.text);
        text = text.replaceAll(allowed.text, '');
      }
      for (const line of text.split('\n')) {
        if (ROUTE.test(line)) found.push(`${name}: ${line.trim()}`);
        ROUTE.lastIndex = 0;
      }
    }
    expect(found).toEqual([]);
  });

  it("name none of the operator's settings", () => {
    const names = settingNames();
    expect(names).toEqual(expect.arrayContaining(['BILLING_MODE', 'STRIPE_SECRET_KEY', 'OPERATOR_BASIC_AUTH', 'ALLOW_PRIVATE_UPSTREAMS']));
    const found: string[] = [];
    for (const path of files) {
      const text = readableSource(path);
      for (const setting of names) if (new RegExp(`\\b${setting}\\b`).test(text)) found.push(`${relative(DASHBOARD_SRC, path)}: ${setting}`);
    }
    expect(found).toEqual([]);
  });

  it("put refusals worded for developers in a person's words", () => {
    // The auto top-up refusal names two settings; the add-funds one a setting in parentheses.
    const autoTopup = peopleError({
      status: 403,
      code: 'live_billing',
      message: 'Auto top-up needs live billing with Stripe configured',
      hint: 'The operator sets BILLING_MODE=live and STRIPE_SECRET_KEY.',
    });
    expect(autoTopup).toContain('Card payments are not switched on for this service');
    expect(isDeveloperWorded(autoTopup)).toBe(false);

    const oauth = peopleError({
      status: 409,
      code: 'oauth_not_configured',
      message: 'No OAuth app is registered for github.com',
      hint: 'The operator has not registered an app for github.com. You can bring your own: POST /api/v1/oauth/apps {"provider": "github.com"}.',
    });
    expect(isDeveloperWorded(oauth)).toBe(false);
    expect(oauth).toContain('cannot be connected with OAuth yet');

    // A developer's hint gives way to the code's advice; the server's message stays.
    const broke = peopleError({
      status: 402,
      code: 'insufficient_balance',
      message: 'Insufficient balance',
      hint: 'Add funds with POST /api/v1/balance {"amount": 5} (or in the dashboard).',
    });
    expect(broke).toBe('Insufficient balance. Add funds on the Overview page, then try again.');

    // A message that names a route becomes a sentence by status; a person's hint is kept.
    expect(peopleError({ status: 404, code: 'not_found', message: 'API x not found. Search with GET /api/v1/apis?q=...', hint: null })).toBe(
      'That was not found. It may have been removed, or the address is mistyped.',
    );
    expect(peopleError({ status: 400, code: 'validation_failed', message: 'amount must be at most 500', hint: 'Split larger amounts.' })).toBe(
      'amount must be at most 500. Split larger amounts.',
    );
  });

  it('take a route out of a sentence, or drop the sentence', () => {
    expect(
      peopleText(
        "The API itself answered 404; the call kept its cost because the API did the work. Check the request against the API's instructions (GET /api/v1/apis/x.com/instructions).",
        null,
      ),
    ).toBe("The API itself answered 404; the call kept its cost because the API did the work. Check the request against the API's instructions.");
    expect(peopleText('Describe the task: GET /api/v1/discover?q=send+a+text+message (alias: query).', 'fallback')).toBe('fallback');
    expect(peopleText('Try fewer words.', null)).toBe('Try fewer words.');
  });

  it('advise on every callability reason without routes or settings', () => {
    for (const reason of CALLABILITY_REASONS) {
      const advice = callabilityAdvice({ state: 'needs_key', reason, provider: 'github.com' });
      if (advice !== null) expect(isDeveloperWorded(advice), `${reason}: ${advice}`).toBe(false);
    }
    expect(callabilityAdvice({ state: 'ready', reason: 'no_auth' })).toBeNull();
    expect(callabilityAdvice({ state: 'needs_key', reason: 'key_required' })).toContain('Connections page');
  });
});
