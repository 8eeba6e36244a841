import { write, writeSync } from 'node:fs';

export interface BlockLogWriterOptions {
  /** The file descriptor the lines go to (1 for stdout). It stays open: the writer never closes it. */
  fd: number;
  /** A write is started once this many bytes have gathered (and none is in flight). */
  minLength: number;
  /** Lines gathered are written at least this often, however few (0: never by time). Default 1,000 ms. */
  flushIntervalMs?: number;
  /** Told once per failed write other than a closed reader (EPIPE, after which lines are dropped). */
  onError?: (error: NodeJS.ErrnoException) => void;
}

/** How long a write refused with EAGAIN (a full non-blocking pipe) waits before it is tried again. */
const RETRY_MS = 10;

/**
 * A pino destination that writes log lines in blocks, asynchronously, from Buffers.
 *
 * Each line is encoded once into a block (a Buffer); a block is handed to `fs.write` once it holds
 * `minLength` bytes and no write is in flight, while the lines that follow gather in a second block.
 * pino's own destination (sonic-boom) keeps lines as strings joined with `+=`, measures the last one's
 * byte length at every line and re-encodes each block it wrote to find what is left: a request line
 * through pino cost 8.2 µs of CPU with it and 3.3 µs with this writer, and under the proxy bench's load
 * the edge spent 174 against 195 µs per call (docs/BENCHMARKS.md, the proxy section's reading).
 *
 * Lines are never dropped while the reader takes them: a write cut short is continued, a full
 * non-blocking pipe (EAGAIN) is retried, and lines gathered meanwhile grow the block. After EPIPE (the
 * reader is gone) lines are dropped, as pino's own destination does. `flushSync` (for the process's
 * exit) writes the gathered lines synchronously; a block already handed to the thread pool is left to it.
 */
export class BlockLogWriter {
  readonly #fd: number;
  readonly #minLength: number;
  readonly #capacity: number;
  readonly #onError: ((error: NodeJS.ErrnoException) => void) | undefined;
  /** Lines gathered, not yet handed to a write. */
  #block: Buffer;
  #length = 0;
  /** The block a write has in flight (null when none), and the part of it still to write. */
  #out: Buffer | null = null;
  #outStart = 0;
  #outEnd = 0;
  /** The emptied block of the last write, reused for the next lines. */
  #spare: Buffer | null;
  /** Bytes taken by `write` and bytes written (or dropped) so far, for `flush`'s callbacks. */
  #taken = 0;
  #done = 0;
  #waiters: Array<{ upTo: number; callback: (error?: Error) => void }> = [];
  #broken = false;
  readonly #timer: NodeJS.Timeout | null;
  readonly #written = (error: NodeJS.ErrnoException | null, bytes: number) => this.#afterWrite(error, bytes);

  constructor(options: BlockLogWriterOptions) {
    if (!Number.isInteger(options.minLength) || options.minLength < 1) throw new RangeError('minLength must be a positive integer');
    this.#fd = options.fd;
    this.#minLength = options.minLength;
    // Room for a block and the lines of a burst that arrive while it is written.
    this.#capacity = Math.max(4 * options.minLength, 16_384);
    this.#block = Buffer.allocUnsafe(this.#capacity);
    this.#spare = Buffer.allocUnsafe(this.#capacity);
    this.#onError = options.onError;
    const interval = options.flushIntervalMs ?? 1_000;
    this.#timer = interval > 0 ? setInterval(() => this.#startIfIdle(), interval).unref() : null;
  }

  /** Takes one line (pino passes each whole, newline included). Always true: nothing is refused. */
  write(line: string): boolean {
    if (this.#broken) return true;
    // UTF-8 takes at most three bytes per UTF-16 unit.
    const most = line.length * 3;
    if (this.#block.length - this.#length < most) this.#makeRoom(most);
    const bytes = this.#block.write(line, this.#length, 'utf8');
    this.#length += bytes;
    this.#taken += bytes;
    if (this.#out === null && this.#length >= this.#minLength) this.#start();
    return true;
  }

  /** Calls back once every line taken before this call is written (or dropped after EPIPE). */
  flush(callback: (error?: Error) => void = () => {}): void {
    if (this.#done >= this.#taken) {
      process.nextTick(callback);
      return;
    }
    this.#waiters.push({ upTo: this.#taken, callback });
    this.#startIfIdle();
  }

  /**
   * Writes the lines gathered synchronously: for the process's exit, when no callback would run. A
   * block a write has in flight is left to it (its thread finishes it unless the process is killed).
   */
  flushSync(): void {
    if (this.#broken || this.#length === 0) return;
    let start = 0;
    while (start < this.#length) {
      try {
        start += writeSync(this.#fd, this.#block, start, this.#length - start);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== 'EAGAIN') {
          if (code !== 'EPIPE') this.#onError?.(error as NodeJS.ErrnoException);
          break;
        }
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, RETRY_MS);
      }
    }
    this.#done += this.#length;
    this.#length = 0;
  }

  /** Stops the periodic flush. Lines still gathered are written by `flush` or `flushSync`. */
  close(): void {
    if (this.#timer) clearInterval(this.#timer);
  }

  #startIfIdle(): void {
    if (this.#out === null && this.#length > 0) this.#start();
  }

  #start(): void {
    this.#out = this.#block;
    this.#outStart = 0;
    this.#outEnd = this.#length;
    this.#block = this.#spare ?? Buffer.allocUnsafe(this.#capacity);
    this.#spare = null;
    this.#length = 0;
    write(this.#fd, this.#out, 0, this.#outEnd, null, this.#written);
  }

  #makeRoom(most: number): void {
    // Hand what is gathered to a write if none is in flight: the next block is empty.
    if (this.#out === null && this.#length > 0) {
      this.#start();
      if (this.#block.length >= most) return;
    }
    // A write is in flight (or the line is larger than a block): the block grows.
    const grown = Buffer.allocUnsafe(Math.max(2 * this.#block.length, this.#length + most));
    this.#block.copy(grown, 0, 0, this.#length);
    this.#block = grown;
  }

  #afterWrite(error: NodeJS.ErrnoException | null, bytes: number): void {
    if (error) {
      if (error.code === 'EAGAIN') {
        setTimeout(() => this.#continue(), RETRY_MS);
        return;
      }
      if (error.code === 'EPIPE') {
        // The reader is gone: everything from here on is dropped.
        this.#broken = true;
        this.#done = this.#taken;
        this.#length = 0;
        this.#out = null;
        this.#settle();
        return;
      }
      this.#onError?.(error);
      // This block is lost; the lines after it are still tried.
      bytes = this.#outEnd - this.#outStart;
    }
    this.#outStart += bytes;
    this.#done += bytes;
    if (this.#outStart < this.#outEnd) {
      this.#continue();
      return;
    }
    // A block grown by a burst is not kept as the spare.
    if (this.#out!.length <= this.#capacity) this.#spare = this.#out;
    this.#out = null;
    this.#settle();
    if (this.#length >= this.#minLength || (this.#length > 0 && this.#waiters.length > 0)) this.#start();
  }

  #continue(): void {
    write(this.#fd, this.#out!, this.#outStart, this.#outEnd - this.#outStart, null, this.#written);
  }

  #settle(): void {
    if (this.#waiters.length === 0) return;
    const due = this.#waiters.filter((waiter) => waiter.upTo <= this.#done);
    if (due.length === 0) return;
    this.#waiters = this.#waiters.filter((waiter) => waiter.upTo > this.#done);
    for (const waiter of due) waiter.callback();
  }
}
