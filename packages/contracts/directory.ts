import { z } from 'zod';
import { apiOAuthSchema } from './auth-scheme.js';

/**
 * A directory API id: lowercase letters, digits, ".", "_" and "-", starting with a letter or digit,
 * at most 200 characters (ids are derived from provider and service names, e.g. `twilio.com` or
 * `googleapis.com-sheets`). The one definition every route, job and import uses.
 */
export const API_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,199}$/;
/** A directory category: lower-case words joined by "_", like the catalog's `machine_learning`. */
export const CATEGORY_PATTERN = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
export const apiId = z.string().regex(API_ID_PATTERN, 'must be a directory API id (lowercase letters, digits, ".", "_", "-")');

/** Whether the caller can call an API now, and if not what it takes (see docs/decisions/callability-states.md). */
export const CALLABILITY_STATES = ['ready', 'needs_key', 'needs_oauth', 'unavailable'] as const;
export type CallabilityState = (typeof CALLABILITY_STATES)[number];
/**
 * Why an API is in its state, a stable code an agent can act on:
 * - ready: `no_auth` (the upstream needs no credentials), `platform_key` (the operator's key),
 *   `own_key` (the caller's connected key), `oauth_connection` (the caller's ready OAuth connection);
 * - needs_key: `key_required` (an API key, bearer token or basic credentials of the caller's own);
 * - needs_oauth: `oauth_app` (the operator registered an OAuth app for the provider), `own_oauth_app`
 *   (the caller's account did), `reauth_required` (the caller's connection needs a person again);
 * - unavailable: `no_oauth_app` (no OAuth app for the provider), `oauth_not_described` (the
 *   description declares no OAuth flow the platform keeps: none, or only the password flow),
 *   `placeholder_provider` (its authorization server is a placeholder host, so it has no provider),
 *   `oauth_flow_unsupported` (no authorization-code, implicit or client-credentials flow),
 *   `unsupported_scheme` (an auth scheme the gateway cannot carry), `key_not_allowed` (the calling
 *   agent key's allow-list leaves the API out).
 */
export const CALLABILITY_REASONS = [
  'no_auth',
  'platform_key',
  'own_key',
  'oauth_connection',
  'key_required',
  'oauth_app',
  'own_oauth_app',
  'reauth_required',
  'no_oauth_app',
  'oauth_not_described',
  'placeholder_provider',
  'oauth_flow_unsupported',
  'unsupported_scheme',
  'key_not_allowed',
] as const;
export type CallabilityReason = (typeof CALLABILITY_REASONS)[number];
export const callability = z
  .object({
    state: z
      .enum(CALLABILITY_STATES)
      .describe(
        'ready: callable now; needs_key: connect your own key first; needs_oauth: connect with OAuth first (or ask a person to); unavailable: not callable through the platform (reason says why)',
      ),
    reason: z.enum(CALLABILITY_REASONS).describe('Why, as a stable code'),
    hint: z.string().optional().describe('What to do, in words (absent when ready)'),
    keyDocsUrl: z.string().optional().describe("needs_key: where the API's documentation says to get a key"),
    provider: z.string().optional().describe("OAuth 2 APIs: who issues the tokens (the authorization server's host)"),
  })
  .describe('Whether the caller can call the API now. Anonymous callers get the part that does not depend on an account (no connections counted).');
export type Callability = z.infer<typeof callability>;

/** A per-path price: calls matching it cost its price instead of the API's pricePerCall (the first matching rule wins). */
export const priceRule = z.object({
  method: z.string().describe('The HTTP method it prices, or * for any'),
  path: z
    .string()
    .describe(
      "The path under the API's base URL (as in call_api's path); a trailing * prices every path under it. Matched regardless of letter case, trailing slash and format suffix (/report.json)",
    ),
  pricePerCall: z.number().describe('Dollars per call on this path, instead of pricePerCall (and instead of byokPricePerCall)'),
});
export type PriceRule = z.infer<typeof priceRule>;

export const apiSummary = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string(),
  service: z.string().nullable(),
  category: z.string(),
  categories: z.array(z.string()),
  description: z.string(),
  pricePerCall: z.number().describe("Dollars per call, unless a priceRules entry matches the call's method and path"),
  priceRules: z
    .array(priceRule)
    .optional()
    .describe('Per-path prices that replace pricePerCall, the first match winning; absent when every call costs pricePerCall'),
  featured: z.boolean(),
  votes: z.number().int(),
  callability,
});
export const endpoint = z.object({
  method: z.string(),
  path: z.string(),
  summary: z.string(),
  scopes: z
    .array(z.string())
    .optional()
    .describe('The OAuth scopes the operation declares, where it declares any; any one alternative may be enough (Google lists each as its own)'),
});
export const apiDetail = apiSummary.extend({
  version: z.string().nullable(),
  baseUrl: z
    .string()
    .nullable()
    .describe(
      "The upstream's base URL for APIs from the public catalog; null for APIs the operator registered, whose upstream may be a private host",
    ),
  authScheme: z.record(z.string(), z.unknown()),
  oauth: apiOAuthSchema
    .nullable()
    .describe("The OAuth 2 flows and scopes the API's description declares (URLs and scope descriptions); null without OAuth 2"),
  oauthProvider: z
    .string()
    .nullable()
    .describe(
      'Who issues its tokens (the authorization server host, e.g. accounts.google.com); one OAuth app for this provider serves all its APIs. Null without OAuth 2, or when the description names a placeholder server',
    ),
  keyDocsUrl: z.string().nullable().describe('Where a caller gets a key of their own, from the description (https); null when unknown or not needed'),
  proxyPath: z.string(),
  byokPricePerCall: z.number().nullable(),
  priceRules: z
    .array(priceRule)
    .describe('Per-path prices that replace pricePerCall (and byokPricePerCall), the first match winning; empty when every call costs pricePerCall'),
  platformKey: z.boolean(),
  source: z.string(),
  endpointCount: z.number().int(),
  endpoints: z.array(endpoint),
});
export type ApiSummary = z.infer<typeof apiSummary>;
export type ApiDetail = z.infer<typeof apiDetail>;
