import type { Logger } from 'pino';

/**
 * Runs `stop` once on SIGINT/SIGTERM and exits when it finishes (or after the grace period, so a
 * stuck dependency cannot keep a process alive forever).
 */
export function onShutdown(log: Logger, graceSeconds: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping: finishing work in flight');
    const timer = setTimeout(() => {
      log.error('shutdown grace period over; exiting');
      process.exit(1);
    }, graceSeconds * 1000);
    timer.unref();
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('SIGTERM', () => handler('SIGTERM'));
}
