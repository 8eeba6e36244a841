import { z } from 'zod';

/**
 * How an upstream API expects its key: the one definition the catalogue import writes, the operator
 * CLI accepts, the directory shows and the proxy sends. `apiKey` keys travel in a header, a query
 * parameter or a cookie, as the API's OpenAPI description declares.
 */
export const authSchemeSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('none') }),
  z.object({ type: z.literal('apiKey'), in: z.enum(['header', 'query', 'cookie']), name: z.string().min(1).max(200) }),
  z.object({ type: z.literal('bearer') }),
  z.object({ type: z.literal('basic') }),
  z.object({ type: z.literal('oauth2') }),
]);
export type AuthScheme = z.output<typeof authSchemeSchema>;

/** An absolute http(s) URL, at most 2,000 characters. */
const oauthUrl = z
  .string()
  .max(2000)
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL');

/**
 * An API's OAuth 2 description, as its OpenAPI document declares it (the `apis.oauth` column of
 * migration 00027): only the flows declared, and the scopes of every flow merged, each with its
 * description. The password flow is not kept. Many descriptions (all of Google's and Microsoft's)
 * declare only `implicit`, with no token URL: the platform still runs the authorization code flow
 * with PKCE for them, against the token endpoint of the operator's OAuth app registration (see
 * docs/decisions/oauth-descriptions-imported.md).
 */
export const apiOAuthSchema = z.object({
  flows: z
    .object({
      authorizationCode: z.object({ authorizationUrl: oauthUrl, tokenUrl: oauthUrl, refreshUrl: oauthUrl.optional() }).optional(),
      clientCredentials: z.object({ tokenUrl: oauthUrl, refreshUrl: oauthUrl.optional() }).optional(),
      implicit: z.object({ authorizationUrl: oauthUrl }).optional(),
    })
    .refine((f) => f.authorizationCode || f.clientCredentials || f.implicit, 'at least one flow: authorizationCode, clientCredentials or implicit'),
  /** Scope name to its description (plain text, possibly empty). */
  scopes: z.record(z.string().min(1).max(300), z.string().max(300)),
});
export type ApiOAuth = z.output<typeof apiOAuthSchema>;
