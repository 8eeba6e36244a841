import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BlockLogWriter } from '#core/platform';

const flushed = (writer: BlockLogWriter) => new Promise<void>((resolve) => writer.flush(() => resolve()));
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Lines of varied length and script (multi-byte UTF-8 included), numbered so order is checked. */
function lines(count: number): string[] {
  const words = ['plain', 'café', '日本語のログ', 'emoji 🚀', 'x'.repeat(700)];
  return Array.from({ length: count }, (_, i) => `{"n":${i},"text":${JSON.stringify(words[i % words.length]!.repeat(1 + (i % 3)))}}\n`);
}

/** A FIFO whose read end the test holds, non-blocking on both sides (a full pipe answers EAGAIN). */
function fifo() {
  const path = join(mkdtempSync(join(tmpdir(), 'log-writer-')), 'fifo');
  execFileSync('mkfifo', [path]);
  const readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
  return { readFd, writeFd };
}

describe('BlockLogWriter (the edge log lines destination)', () => {
  it('writes every line, in order and byte for byte, through many blocks, and calls flush back once they are written', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'log-writer-')), 'out.log');
    const fd = openSync(file, 'w');
    const writer = new BlockLogWriter({ fd, minLength: 4096 });
    const expected = lines(20_000);
    // All in one turn of the event loop: the first block is in flight while the rest gather (the block grows).
    for (const line of expected) expect(writer.write(line)).toBe(true);
    await flushed(writer);
    expect(readFileSync(file, 'utf8')).toBe(expected.join(''));
    // And again, a line at a time across turns, so blocks are handed over as they fill.
    const more = lines(2_000).map((line) => line.replace('"n"', '"m"'));
    for (const [i, line] of more.entries()) {
      writer.write(line);
      if (i % 50 === 0) await pause(0);
    }
    await flushed(writer);
    expect(readFileSync(file, 'utf8')).toBe(expected.join('') + more.join(''));
    writer.close();
    closeSync(fd);
  });

  it('writes a line larger than a block whole, and lines below the block size within the flush interval', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'log-writer-')), 'out.log');
    const fd = openSync(file, 'w');
    const writer = new BlockLogWriter({ fd, minLength: 1024, flushIntervalMs: 50 });
    const huge = `{"big":"${'é'.repeat(200_000)}"}\n`;
    writer.write(huge);
    await flushed(writer);
    expect(readFileSync(file, 'utf8')).toBe(huge);
    writer.write('{"small":1}\n');
    expect(readFileSync(file, 'utf8')).toBe(huge);
    await pause(300);
    expect(readFileSync(file, 'utf8')).toBe(`${huge}{"small":1}\n`);
    writer.close();
    closeSync(fd);
  });

  it('serves as pino destination: the lines are pino lines', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'log-writer-')), 'out.log');
    const fd = openSync(file, 'w');
    const writer = new BlockLogWriter({ fd, minLength: 4096 });
    const logger = pino({ level: 'info' }, writer);
    for (let i = 0; i < 500; i += 1) logger.child({ reqId: `r${i}` }).info({ res: { statusCode: 200 } }, 'request completed');
    await flushed(writer);
    const written = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { reqId: string; msg: string });
    expect(written).toHaveLength(500);
    expect(written.map((line) => line.reqId)).toEqual(Array.from({ length: 500 }, (_, i) => `r${i}`));
    expect(written.every((line) => line.msg === 'request completed')).toBe(true);
    writer.close();
    closeSync(fd);
  });

  it('keeps every line when the reader is slow (a full non-blocking pipe answers EAGAIN, and the write is tried again)', async () => {
    const { readFd, writeFd } = fifo();
    const writer = new BlockLogWriter({ fd: writeFd, minLength: 4096 });
    const expected = lines(5_000).join('');
    // About 1.4 MB into a pipe that holds 64 KB: writes are refused until the reader below catches up.
    for (const line of lines(5_000)) writer.write(line);
    const done = flushed(writer);
    let flushedYet = false;
    void done.then(() => (flushedYet = true));
    const received: Buffer[] = [];
    const chunk = Buffer.alloc(16_384);
    let total = 0;
    const want = Buffer.byteLength(expected);
    const deadline = Date.now() + 20_000;
    while (total < want && Date.now() < deadline) {
      try {
        const n = readSync(readFd, chunk, 0, chunk.length, null);
        received.push(Buffer.from(chunk.subarray(0, n)));
        total += n;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
      // The reader is slow: the writer meets a full pipe again and again.
      await pause(2);
    }
    await done;
    expect(flushedYet).toBe(true);
    expect(Buffer.concat(received).toString('utf8')).toBe(expected);
    writer.close();
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('drops lines once the reader is gone (EPIPE) without throwing, and still calls flush back', async () => {
    const { readFd, writeFd } = fifo();
    closeSync(readFd);
    const errors: unknown[] = [];
    const writer = new BlockLogWriter({ fd: writeFd, minLength: 64, onError: (error) => errors.push(error) });
    for (const line of lines(100)) writer.write(line);
    await flushed(writer);
    expect(() => writer.write('{"after":true}\n')).not.toThrow();
    await flushed(writer);
    writer.flushSync();
    // A closed reader is not an error to report (pino's own destination stops the same way).
    expect(errors).toEqual([]);
    writer.close();
    closeSync(writeFd);
  });

  it('flushSync writes the lines gathered, for the exit hook', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'log-writer-')), 'out.log');
    const fd = openSync(file, 'w');
    const writer = new BlockLogWriter({ fd, minLength: 4096, flushIntervalMs: 0 });
    writer.write('{"a":1}\n');
    writer.write('{"b":"ü"}\n');
    writer.flushSync();
    expect(readFileSync(file, 'utf8')).toBe('{"a":1}\n{"b":"ü"}\n');
    writer.close();
    closeSync(fd);
  });
});
