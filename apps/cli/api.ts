// `npm run api -- <command>`: operators add, update and price metered APIs, and register OAuth apps (see api-cli.ts).
import { SettingsError } from '#core/platform';
import { CliError, runApiCli } from './api-cli.js';

/** Standard input whole (a client secret piped in: `printf %s "$SECRET" | npm run api -- oauth-app set ... --client-secret-stdin`). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

try {
  console.log(await runApiCli(process.argv.slice(2), process.env, { readStdin }));
} catch (error) {
  if (error instanceof CliError || error instanceof SettingsError) {
    console.error(`[api] ${error.message}`);
    process.exit(2);
  }
  throw error;
}
