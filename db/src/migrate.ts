import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import shift from 'postgres-shift';

export const migrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

// Any number, fixed: serialises concurrent migration runs (several test workers, `up` and a worker).
const MIGRATION_LOCK = 727_001;

/**
 * Applies the forward-only SQL migrations in db/migrations (postgres-shift: one folder per
 * migration holding index.sql). Safe to call from several processes at once: a session-level
 * advisory lock on a single dedicated connection serialises them.
 */
export async function migrate(databaseUrl: string, log: (line: string) => void = () => {}): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await shift({
      sql,
      path: migrationsDir,
      before: ({ migration_id, name }) => log(`applying migration ${migration_id} ${name}`),
    });
  } finally {
    await sql.end({ timeout: 5 });
  }
}
