import { z } from 'zod';
import { envFlag, parseSettings, sharedSettings } from '../../../db/src/settings.js';

/** The edge's settings: one zod schema, parsed once at start-up. Every key is listed in .env.example. */
export const edgeSettings = sharedSettings.extend({
  HOST: z.string().default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  /** The site root as users reach it; the API lives under PUBLIC_URL/api/v1. */
  PUBLIC_URL: z.string().url().default('http://127.0.0.1:3000'),
  TRUST_PROXY: envFlag.default(false),
  /** Largest JSON body the API accepts (bytes); bigger bodies get 413. */
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(100 * 1024 * 1024).default(1024 * 1024),
  /** How long a verified key stays in the in-process cache; revocations are pushed through Redis regardless. */
  KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
  /** Secret for signing dashboard session JWTs (HS256). Must be set in production. */
  SESSION_SECRET: z.string().min(32).default('dev-only-session-secret-change-me-0123456789'),
  /** Seconds search, discovery and category answers stay in the shared Redis cache; 0 disables it. */
  DIRECTORY_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(30),
  /** Operator credentials for the queue board (`user:password`); unset disables the board. */
  OPERATOR_BASIC_AUTH: z.string().regex(/^[^:]+:.+$/).optional(),
});

export type EdgeSettings = z.output<typeof edgeSettings>;

export function loadEdgeSettings(env: NodeJS.ProcessEnv = process.env): EdgeSettings {
  const settings = parseSettings(edgeSettings, env);
  if (settings.NODE_ENV === 'production' && settings.SESSION_SECRET === edgeSettings.shape.SESSION_SECRET.parse(undefined)) {
    throw new Error('SESSION_SECRET must be set to a secret of at least 32 characters in production');
  }
  return settings;
}
