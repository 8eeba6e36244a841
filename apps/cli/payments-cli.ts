import { parseArgs } from 'node:util';
import { formatDollars } from '#contracts/money';
import { parseSettings, sharedSettings } from '#core/platform';
import { createSql } from '#db/sql';
import { listUnrecordedX402Payments, recordUnrecordedX402Payment } from '#db/x402';
import { CliError } from './api-cli.js';

export const USAGE = `Operator tool for payments that need a hand.

  npm run payments -- x402-unrecorded             x402 payments settled on chain whose ledger entries the edge
                                                  could not write (the caller was served); one line each
  npm run payments -- x402-record --hash HEX      writes such a payment's ledger pair as the edge would have (an
                                                  x402_credit and the call's charge; the balance does not move)
                                                  and marks it settled; doing it twice records it once`;

const settingsSchema = sharedSettings.pick({ DATABASE_URL: true });

/**
 * Runs one operator command; returns what it prints. Throws CliError for bad usage. Tests call this
 * directly; `apps/cli/payments.ts` is the process entry behind `npm run payments`.
 */
export async function runPaymentsCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') return USAGE;
  let values: { hash?: string };
  try {
    ({ values } = parseArgs({ args: rest, strict: true, options: { hash: { type: 'string' } } }));
  } catch (error) {
    throw new CliError((error as Error).message);
  }
  if (command !== 'x402-unrecorded' && command !== 'x402-record') throw new CliError(`unknown command "${command}"\n\n${USAGE}`);
  const settings = parseSettings(settingsSchema, env);
  const sql = createSql(settings.DATABASE_URL, { max: 1, appName: 'payments-cli' });
  try {
    if (command === 'x402-unrecorded') {
      const payments = await listUnrecordedX402Payments(sql);
      if (payments.length === 0) return 'no x402 payment is waiting to be recorded';
      return payments
        .map((p) =>
          [
            `hash ${p.hash}`,
            `account ${p.accountId}`,
            `$${formatDollars(p.amountMicros)}`,
            `transaction ${p.transaction ?? '(not kept)'} on ${p.network ?? '(not kept)'}`,
            `item ${p.call?.item ?? '(not kept)'}${p.call?.apiId ? ` (${p.call.apiId})` : ''}`,
            `since ${p.updatedAt.toISOString()}`,
            `reason: ${p.reason ?? ''}`,
          ].join('  '),
        )
        .join('\n');
    }
    if (!values.hash || !/^[0-9a-f]{64}$/.test(values.hash)) throw new CliError('--hash is required: the 64 hex digits x402-unrecorded lists');
    const recorded = await recordUnrecordedX402Payment(sql, Buffer.from(values.hash, 'hex'));
    if (!recorded) {
      throw new CliError(
        `no payment ${values.hash} is waiting to be recorded (recorded already, never settled, or kept without its settlement); see x402-unrecorded`,
      );
    }
    return `recorded: charge ${recorded.chargeId}`;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
