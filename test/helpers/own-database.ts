import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll } from 'vitest';

/**
 * Runs before each test file (vitest `setupFiles`): the file gets a database of its own, cloned from
 * the migrated template that the global setup prepared (catalog and docs imported), and
 * DATABASE_URL points at it for everything the file builds (apps, workers, spawned processes). So
 * a test that changes catalog rows or counts a table never sees another file's writes. The clone
 * is a file copy of about 30 MB (a fraction of a second) and is dropped when the file ends.
 */
const templateUrl = (process.env.TEST_TEMPLATE_DATABASE_URL ??= process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/platform_test');
const template = new URL(templateUrl);
const templateName = decodeURIComponent(template.pathname.slice(1));
const name = `${templateName}_f${randomBytes(4).toString('hex')}`;
const maintenance = new URL(templateUrl);
maintenance.pathname = '/postgres';

const admin = postgres(maintenance.toString(), { max: 1, onnotice: () => {}, connect_timeout: 5 });
// Two files cloning at once may find the template busy for an instant (SQLSTATE 55006): retry.
for (let attempt = 1; ; attempt++) {
  try {
    await admin.unsafe(`create database "${name}" template "${templateName}" strategy file_copy`);
    break;
  } catch (error) {
    if ((error as { code?: string }).code !== '55006' || attempt >= 50) throw error;
    await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 100));
  }
}
const own = new URL(templateUrl);
own.pathname = `/${name}`;
process.env.DATABASE_URL = own.toString();

afterAll(async () => {
  await admin.unsafe(`drop database if exists "${name}" with (force)`);
  await admin.end({ timeout: 5 });
});
