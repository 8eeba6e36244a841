// `npm run payments -- <command>`: operators finish payments the edge could not (see payments-cli.ts).
import { SettingsError } from '#core/platform';
import { CliError } from './api-cli.js';
import { runPaymentsCli } from './payments-cli.js';

try {
  console.log(await runPaymentsCli(process.argv.slice(2)));
} catch (error) {
  if (error instanceof CliError || error instanceof SettingsError) {
    console.error(`[payments] ${error.message}`);
    process.exit(2);
  }
  throw error;
}
