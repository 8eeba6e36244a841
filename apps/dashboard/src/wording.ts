/**
 * Errors and advice as a person reads them. The API's `error` and `hint` are written for the
 * developers and agents that call it: they name routes ("POST /api/v1/oauth/apps"), request bodies
 * ({"amount": 5}) and the operator's settings (BILLING_MODE). The dashboard keeps the server's words
 * where they are already a person's, and otherwise says the same thing by the error's code. Pure
 * functions (no window), so the unit tier tests them.
 */

/** A route ("GET /api/v1/…", "/api/…"), a request body or an operator setting's name (TWO_WORDS or more in capitals). */
const DEVELOPER_WORDED = /\b(?:GET|POST|PUT|PATCH|DELETE)\s+\/|\/api\/|[{}]|"[a-zA-Z]+":|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\bMCP:|\boperator CLI\b/;

export function isDeveloperWorded(text: string): boolean {
  return DEVELOPER_WORDED.test(text);
}

/** What the dashboard says instead of the server's message, for codes whose messages are written for developers. */
const PEOPLE_MESSAGE: Record<string, string> = {
  live_billing:
    'Card payments are not switched on for this service, so funds cannot be added by card and automatic top-up is not available. Ask the people who run this service if you need it.',
  oauth_not_configured:
    'This API cannot be connected with OAuth yet: nobody has registered an app for it with its provider. Ask the people who run this service, or connect an API that is ready.',
  csrf_failed: 'The page is out of date. Reload it and try again.',
};

/** What to do, by code, where the server's hint is for developers (or there is none). */
const PEOPLE_HINT: Record<string, string> = {
  insufficient_balance: 'Add funds on the Overview page, then try again.',
  connection_required: 'Connect it on the Connections page, then try again.',
  connection_needs_reauth: 'Reconnect it on the Connections page.',
  api_not_callable: 'Connect it on the Connections page, or choose an API you can call now.',
  key_disabled: 'Enable it on the Keys page.',
  key_revoked: 'Make a new key on the Keys page.',
  not_found: 'It may have been removed, or the address is mistyped.',
  internal_error: 'Try again in a moment.',
  service_unavailable: 'Try again in a moment.',
  upstream_unavailable: 'Try again in a moment.',
};

/** What to say when the server's message is the developer's and its code has no sentence above. */
function fallbackMessage(status: number): string {
  if (status === 404) return 'That was not found.';
  if (status === 403) return 'You are not allowed to do this with this account.';
  if (status === 409) return 'This cannot be done in its current state. Reload the page and try again.';
  if (status >= 500) return 'Something went wrong on our side. Try again in a moment.';
  return 'The request was refused. Check what you entered and try again.';
}

const sentence = (text: string) => {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
};

/**
 * A refusal in words a person can act on: the server's message and hint where they are already
 * worded for people; the code's own sentence where the server's names a route, a body or a
 * setting (a developer-worded hint gives way to the code's own advice, or to none: it tells an API
 * caller what to send).
 */
export function peopleError(refusal: { status: number; code: string; message: string; hint: string | null }): string {
  const mapped = PEOPLE_MESSAGE[refusal.code];
  if (mapped) return mapped;
  const message = isDeveloperWorded(refusal.message) ? fallbackMessage(refusal.status) : sentence(refusal.message);
  const hint = refusal.hint && !isDeveloperWorded(refusal.hint) ? refusal.hint : PEOPLE_HINT[refusal.code];
  return hint ? `${message} ${sentence(hint)}` : message;
}

/** An API's callability state and reason (the directory's `callability`). */
export interface CallabilityFacts {
  state: string;
  reason: string;
  provider?: string | undefined;
}

/** What a person can do about an API they cannot call yet; null when it is callable now. */
export function callabilityAdvice(callability: CallabilityFacts): string | null {
  const provider = callability.provider ?? 'its provider';
  switch (callability.reason) {
    case 'no_auth':
    case 'platform_key':
    case 'own_key':
    case 'oauth_connection':
      return null;
    case 'key_required':
      return 'It needs your own key for this API: get one from the API’s provider, then connect it on the Connections page. Calls then use it.';
    case 'oauth_app':
    case 'own_oauth_app':
      return `Connect your ${provider} account once on the Connections page (one sign-in and consent). An agent can also ask you to, from your Inbox.`;
    case 'reauth_required':
      return `Your ${provider} connection needs you to sign in again: reconnect it on the Connections page.`;
    case 'no_oauth_app':
      return `It signs in with ${provider}, and nobody has registered an app with ${provider} for this service yet, so it cannot be connected for now.`;
    case 'key_not_allowed':
      return 'This agent key may not call it: the account’s owner can make a key that allows it.';
    case 'unsupported_scheme':
      return 'It asks for a kind of sign-in this service cannot pass on, so it cannot be called through it.';
    default:
      return 'It cannot be called through this service: its description declares no way of signing in that the service supports.';
  }
}

/**
 * A server's sentence shown as it is when it is worded for people; a parenthesis that names a route
 * is taken out ("… instructions (GET /api/v1/apis/x/instructions)." reads "… instructions."), and
 * what still names a route, a body or a setting gives way to `fallback`.
 */
export function peopleText(text: string, fallback: string | null): string | null {
  const trimmed = text.replace(/\s*\([^()]*(?:\/api\/|\b(?:GET|POST|PUT|PATCH|DELETE)\s+\/)[^()]*\)/g, '');
  return isDeveloperWorded(trimmed) ? fallback : trimmed;
}
