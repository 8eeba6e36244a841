import { z } from 'zod';

/** Settings of the directory importer, shared by the queue worker and the import/seed CLIs. */
export const directorySettings = z.object({
  /** Default price of a proxied call for imported APIs, in dollars (the curation file overrides per API). */
  DIRECTORY_DEFAULT_PRICE: z
    .string()
    .regex(/^\d{1,6}(\.\d{1,6})?$/, 'a dollar amount such as 0.001')
    .default('0.001'),
  /** The operator's curation file: featured APIs, prices, platform keys (by env var name). */
  DIRECTORY_CURATION_FILE: z.string().default('db/seed/curation.json'),
  /** 64 hex digits; encrypts platform keys named in the curation file (AES-256-GCM). */
  CONNECTIONS_MASTER_KEY: z.string().regex(/^[0-9a-f]{64}$/i).optional(),
});
export type DirectorySettings = z.output<typeof directorySettings>;
