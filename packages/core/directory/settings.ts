import { z } from 'zod';
import { masterKeySetting } from '#core/platform';

/** Settings of the directory importer, shared by the queue worker and the import/seed CLIs. */
export const directorySettings = z.object({
  /** Default price of a proxied call for imported APIs, in dollars (the curation file overrides per API). */
  DIRECTORY_DEFAULT_PRICE: z
    .string()
    .regex(/^\d{1,6}(\.\d{1,6})?$/, 'a dollar amount such as 0.001')
    .default('0.001'),
  /** The operator's curation file: featured APIs, prices, platform keys (by env var name). */
  DIRECTORY_CURATION_FILE: z.string().default('db/seed/curation.json'),
  /**
   * The sentence-embedding model of discovery's dense retrieval (packages/core/directory/semantic.ts):
   * empty for the one the provisioning scripts build into .venv/models, 'off' to rank by words only.
   * The importer stores every API's vector with it; the edge embeds tasks with it.
   */
  DISCOVERY_MODEL_DIR: z.string().default(''),
  /** Seals platform keys named in the curation file, exactly as the proxy opens them (packages/core/platform/secret-box.ts). */
  CONNECTIONS_MASTER_KEY: masterKeySetting,
});
export type DirectorySettings = z.output<typeof directorySettings>;
