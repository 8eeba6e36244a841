/** Polls `check` every 10 ms until it holds; fails naming `what` after `timeoutMs`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Polls `probe` every 50 ms until it returns something other than undefined, and returns that; fails
 * naming `what` after `timeoutMs`, with `context()` (what was seen meanwhile) when given.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  options: { timeoutMs?: number; context?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 3_000);
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${options.context ? `; ${options.context()}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
