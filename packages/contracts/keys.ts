import { z } from 'zod';

/** What listings and responses show of a key: never the full key, never its hash. */
export const keyMeta = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string().describe('service_sk_ plus the first 8 hex digits of the key'),
  status: z.enum(['enabled', 'disabled', 'revoked']),
  createdAt: z.string().describe('ISO 8601'),
  lastUsedAt: z.string().nullable().describe('ISO 8601; recorded in batches, may lag by a few seconds'),
});
export type KeyMeta = z.infer<typeof keyMeta>;

/** An agent key as listings show it: key metadata plus its limits. */
export const agentKeyMeta = keyMeta.extend({
  spendLimit: z.number().nullable().describe('Dollars this key may spend in total; null for no limit beyond the balance'),
  spent: z.number().describe('Dollars charged to this key so far'),
  allowedApis: z.array(z.string()).nullable().describe('Directory API ids this key may call; null for any'),
  expiresAt: z.string().nullable().describe('ISO 8601; the key is refused (403) from then on'),
  mcpClient: z
    .object({ id: z.string().describe('The OAuth client id'), name: z.string().describe('The name the client registered') })
    .nullable()
    .describe(
      "Set when the key stands for an MCP client's OAuth grant (made on the consent page): the client presents access tokens instead of the key, and deleting the key revokes the grant and its tokens",
    ),
});
export type AgentKeyMeta = z.infer<typeof agentKeyMeta>;
