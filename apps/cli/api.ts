// `npm run api -- <command>`: operators add, update and price metered APIs (see api-cli.ts).
import { SettingsError } from '#core/platform';
import { CliError, runApiCli } from './api-cli.js';

try {
  console.log(await runApiCli(process.argv.slice(2)));
} catch (error) {
  if (error instanceof CliError || error instanceof SettingsError) {
    console.error(`[api] ${error.message}`);
    process.exit(2);
  }
  throw error;
}
