import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Sql } from '#db/sql';
import type { UsageEvent } from '#db/usage';
import { addJob, createQueue, timeOrderedUuid, type Logger } from '#core/platform';
import { storeUsageEvents } from './activity.js';
import { usageBatchJob } from './usage-job.js';

export interface UsageRecorderOptions {
  sql: Sql;
  /** A fail-fast Redis client for the queue (commands time out instead of waiting for Redis). */
  redis: Redis;
  prefix: string;
  batchSize: number;
  flushMs: number;
  bufferMax: number;
  log: Logger;
  /** How long one hand-off to Redis may take before the batch falls back to Postgres. */
  addTimeoutMs?: number;
}

/**
 * Hands usage events to BullMQ off the response path: `record` only appends to a buffer; batches
 * leave every `flushMs` (or at `batchSize`). When Redis refuses a batch it is written straight to
 * Postgres with the same idempotent statement the worker uses; when Postgres refuses too, it goes
 * back into the (bounded) buffer and is retried on the next flush. Every event carries its own id,
 * so a batch that reached both places is still counted once.
 */
export class UsageRecorder {
  private buffer: UsageEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private closed = false;
  readonly queue: Queue;

  constructor(private readonly options: UsageRecorderOptions) {
    // Failed hand-offs are logged by flush(), which falls back from them (createQueue: other queue errors).
    this.queue = createQueue(usageBatchJob.queue, { connection: options.redis, prefix: options.prefix }, options.log);
  }

  record(event: Omit<UsageEvent, 'id'> & { id?: string }): void {
    this.buffer.push({ ...event, id: event.id ?? timeOrderedUuid() });
    // An outcome that arrives while the edge closes (a call settled just after its answer left) is
    // handed off at once: no timer would run for it any more.
    if (this.buffer.length >= this.options.batchSize || this.closed) void this.flush();
    else if (!this.timer && !this.closed) {
      this.timer = setTimeout(() => void this.flush(), this.options.flushMs);
      this.timer.unref();
    }
  }

  get pending(): number {
    return this.buffer.length;
  }

  /** Sends everything buffered now; resolves when the buffer was handed off (or put back after both stores failed). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    if (this.buffer.length === 0) return;
    this.flushing = this.drain().finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      const batch = this.buffer.splice(0, this.options.batchSize);
      if (await this.handOff(batch)) continue;
      // Neither Redis nor Postgres took it: keep it (bounded) and retry on a later flush.
      this.buffer.unshift(...batch);
      const excess = this.buffer.length - this.options.bufferMax;
      if (excess > 0) {
        const dropped = this.buffer.splice(0, excess);
        this.options.log.error(
          { dropped: dropped.length, events: dropped },
          'usage buffer full: oldest usage events dropped (logged here for replay)',
        );
      }
      if (!this.closed && !this.timer) {
        this.timer = setTimeout(() => void this.flush(), Math.max(this.options.flushMs, 1_000));
        this.timer.unref();
      }
      return;
    }
  }

  private async handOff(batch: UsageEvent[]): Promise<boolean> {
    try {
      await addJob(this.queue, usageBatchJob, { events: batch }, {}, this.options.addTimeoutMs ?? 3_000);
      return true;
    } catch (error) {
      this.options.log.warn({ err: error, events: batch.length }, 'usage queue unavailable; writing usage events to Postgres directly');
    }
    try {
      await storeUsageEvents(this.options.sql, batch);
      return true;
    } catch (error) {
      this.options.log.error({ err: error, events: batch.length }, 'usage events could not be stored; kept in memory for retry');
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    if (this.timer) clearTimeout(this.timer);
    await this.queue.close().catch(() => {});
  }
}
