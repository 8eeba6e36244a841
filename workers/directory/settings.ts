import { z } from 'zod';
import { parseSettings, sharedSettings } from '#core/platform';

/** Settings of the directory ranking process (workers/directory/main.ts). */
export const rankerSettings = sharedSettings.extend({
  /**
   * Where the ranking process listens for its edges: loopback when they run on the same machine (the
   * port is private: it has no authentication and must never be published).
   */
  DIRECTORY_RANK_HOST: z.string().default('127.0.0.1'),
  DIRECTORY_RANK_PORT: z.coerce.number().int().min(0).max(65_535).default(3090),
  /**
   * Worker threads ranking beside the process's event loop, each with its own copy of the index and the
   * embedding model (about 400 MB each under load); 0 ranks on the event loop, with one copy.
   */
  DIRECTORY_RANK_WORKERS: z.coerce.number().int().min(0).max(32).default(2),
  /** Discovery's sentence-embedding model: empty for the provisioned one, 'off' to rank by words only (as the edge's). */
  DISCOVERY_MODEL_DIR: z.string().default(''),
  /** Task vectors each ranking thread remembers (about 1.5 KB each); 0 embeds every discovery's task. */
  DISCOVERY_TASK_VECTORS: z.coerce.number().int().min(0).max(1_000_000).default(5000),
  /**
   * How often discovery's feedback signal (per API, the accounts that used it; docs/decisions/discovery-feedback.md)
   * is read from Postgres, in seconds; 0 ranks without it.
   */
  DISCOVERY_FEEDBACK_REFRESH_SECONDS: z.coerce.number().int().min(0).max(86_400).default(600),
  /** Seconds the process waits for answers in flight when asked to stop. */
  SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(1).max(600).default(20),
});

export type RankerSettings = z.output<typeof rankerSettings>;

export function loadRankerSettings(env: NodeJS.ProcessEnv = process.env): RankerSettings {
  return parseSettings(rankerSettings, env);
}
