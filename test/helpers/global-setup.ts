import { migrate } from '#db/migrate';
import { testDatabaseUrl } from './settings.js';

/** Runs once before the suite: brings the test database to the latest migration. */
export default async function setup(): Promise<void> {
  await migrate(testDatabaseUrl());
}
