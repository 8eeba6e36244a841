// `npm run migrate`: applies pending migrations to DATABASE_URL.
import { migrate } from '../migrate.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/platform';
await migrate(databaseUrl, (line) => console.log(`[migrate] ${line}`));
console.log('[migrate] database is up to date');
