// `npm run rotate:master-key`: re-seals every stored secret from CONNECTIONS_MASTER_KEY to
// NEW_CONNECTIONS_MASTER_KEY (docs/OPERATIONS.md, "Rotating keys"). Stop the edge and the workers
// first; start them with the new key after.
import { z } from 'zod';
import { masterKeySetting, parseSettings, SettingsError, sharedSettings } from '#core/platform';
import { createSql } from '#db/sql';
import { rotateMasterKey, RotationError } from './master-key.js';

try {
  const settings = parseSettings(
    sharedSettings.pick({ DATABASE_URL: true }).extend({
      CONNECTIONS_MASTER_KEY: masterKeySetting,
      // Required: unlike CONNECTIONS_MASTER_KEY it has no development default to fall back on.
      NEW_CONNECTIONS_MASTER_KEY: z
        .string({ error: 'set it to the new key (openssl rand -hex 32)' })
        .min(1, 'set it to the new key (openssl rand -hex 32)')
        .transform((value, ctx) => {
          const parsed = masterKeySetting.safeParse(value);
          if (parsed.success) return parsed.data;
          ctx.addIssue({ code: 'custom', message: 'must be 32 bytes written as 64 hex digits or base64' });
          return z.NEVER;
        }),
    }),
  );
  const sql = createSql(settings.DATABASE_URL, { max: 1, appName: 'rotate-master-key' });
  try {
    const report = await rotateMasterKey(sql, settings.CONNECTIONS_MASTER_KEY, settings.NEW_CONNECTIONS_MASTER_KEY);
    console.log(
      `[rotate-master-key] re-sealed ${report.connections} connection keys, ${report.platformKeys} platform keys, ${report.webhookSecrets} webhook secrets, ` +
        `${report.oauthApps} OAuth client secrets, the tokens of ${report.oauthConnections} OAuth connections, ${report.oauthAuthorizations} consent flows' PKCE verifiers ` +
        `and ${report.authorizationServerSecrets} secrets of the MCP authorization server; ` +
        'start the edge and the workers with CONNECTIONS_MASTER_KEY set to the new key',
    );
  } finally {
    await sql.end({ timeout: 5 });
  }
} catch (error) {
  if (error instanceof RotationError || error instanceof SettingsError) {
    console.error(`[rotate-master-key] ${error.message}`);
    process.exit(2);
  }
  throw error;
}
