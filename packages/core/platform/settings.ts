import { z } from 'zod';
import { codecKeysSetting } from './payload-codec.js';

/**
 * Settings every process shares: where the system of record, Redis and Temporal live. Each process
 * extends this with its own settings and parses the result once at start-up (see `parseSettings`).
 */
export const sharedSettings = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/platform'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  /** Prefix of every Redis key and BullMQ queue, so several deployments (or test runs) can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[a-z0-9:_-]+$/i)
    .default('platform'),
  /** The site root as users reach it; the API lives under PUBLIC_URL/api/v1, the dashboard at PUBLIC_URL/. Links in e-mails start here. */
  PUBLIC_URL: z.string().url().default('http://127.0.0.1:3000'),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('cookbook-sessions'),
  TEMPORAL_UI_URL: z.string().url().default('http://127.0.0.1:8233'),
  /**
   * Keys of the payload codec that encrypts what Temporal stores (AES-256-GCM): comma-separated
   * `id:key` pairs, 32-byte keys as hex or base64. The first encrypts; all decrypt. The default is a
   * public development key, refused in production.
   */
  TEMPORAL_CODEC_KEYS: codecKeysSetting,
  /**
   * TLS to a real Temporal cluster (temporal.ts, temporalTls): TEMPORAL_TLS=true for TLS with the
   * system's CAs; a CA file for a private CA; a client certificate and key for mTLS; a server name
   * when the certificate names another host than TEMPORAL_ADDRESS.
   */
  TEMPORAL_TLS: z
    .enum(['true', 'false', ''])
    .optional()
    .transform((value) => value === 'true'),
  TEMPORAL_TLS_CA_FILE: z
    .string()
    .optional()
    .transform((value) => value || undefined),
  TEMPORAL_TLS_CERT_FILE: z
    .string()
    .optional()
    .transform((value) => value || undefined),
  TEMPORAL_TLS_KEY_FILE: z
    .string()
    .optional()
    .transform((value) => value || undefined),
  TEMPORAL_TLS_SERVER_NAME: z
    .string()
    .optional()
    .transform((value) => value || undefined),
});

export class SettingsError extends Error {
  override name = 'SettingsError';
}

/**
 * Parses process settings with a zod schema. A bad value throws a SettingsError naming every
 * offending variable, so a process stops at start-up with a message an operator can act on.
 */
export function parseSettings<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw new SettingsError(`Invalid settings:\n${lines.join('\n')}\nSee .env.example for every setting and its default.`);
}

/** Boolean environment flags written as true/false/1/0/yes/no. */
export const envFlag = z.union([z.boolean(), z.string()]).transform((value, ctx) => {
  if (typeof value === 'boolean') return value;
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  ctx.addIssue({ code: 'custom', message: `expected true or false, got "${value}"` });
  return z.NEVER;
});

/** For process entry points: loads settings or stops the process with the message naming what is wrong. */
export function loadSettingsOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (error) {
    console.error(error instanceof SettingsError || error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
