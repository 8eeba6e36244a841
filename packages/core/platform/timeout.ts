/**
 * `promise`, or a rejection after `ms` if it has not settled by then. The promise itself goes on
 * (a BullMQ `add` waits for Redis for as long as Redis is away; addJob bounds it with this): use it
 * where waiting longer would hold up a caller, and where what the promise does is made good another way.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what = 'the operation'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
