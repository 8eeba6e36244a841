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
