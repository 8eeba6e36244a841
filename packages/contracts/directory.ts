import { z } from 'zod';

/**
 * A directory API id: lowercase letters, digits, ".", "_" and "-", starting with a letter or digit,
 * at most 200 characters (ids are derived from provider and service names, e.g. `twilio.com` or
 * `googleapis.com-sheets`). The one definition every route, job and import uses.
 */
export const API_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,199}$/;
export const apiId = z.string().regex(API_ID_PATTERN, 'must be a directory API id (lowercase letters, digits, ".", "_", "-")');

export const apiSummary = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string(),
  service: z.string().nullable(),
  category: z.string(),
  categories: z.array(z.string()),
  description: z.string(),
  pricePerCall: z.number(),
  featured: z.boolean(),
  votes: z.number().int(),
});
export const endpoint = z.object({ method: z.string(), path: z.string(), summary: z.string() });
export const apiDetail = apiSummary.extend({
  version: z.string().nullable(),
  baseUrl: z
    .string()
    .nullable()
    .describe(
      "The upstream's base URL for APIs from the public catalog; null for APIs the operator registered, whose upstream may be a private host",
    ),
  authScheme: z.record(z.string(), z.unknown()),
  proxyPath: z.string(),
  byokPricePerCall: z.number().nullable(),
  platformKey: z.boolean(),
  source: z.string(),
  endpointCount: z.number().int(),
  endpoints: z.array(endpoint),
});
export type ApiSummary = z.infer<typeof apiSummary>;
export type ApiDetail = z.infer<typeof apiDetail>;
