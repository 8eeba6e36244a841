// `npm run migrate`: applies pending migrations to DATABASE_URL.
import { migrate } from '../migrate.js';
import { parseSettings, sharedSettings } from '#core/platform';

const settings = parseSettings(sharedSettings.pick({ DATABASE_URL: true }));
await migrate(settings.DATABASE_URL, (line) => console.log(`[migrate] ${line}`));
console.log('[migrate] database is up to date');
