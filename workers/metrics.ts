import type { Queue, Worker } from 'bullmq';
import type { Sql } from '#db/sql';
import { createRegistry, prom, serveMetrics, type Registry } from '#core/platform';

// The worker processes' Prometheus metrics (docs/OPERATIONS.md, "Metrics"): served on
// METRICS_HOST:METRICS_PORT like the edge's, never on a public port. Labels: queue and job names
// (declared in core, a dozen), session statuses (two): bounded by construction.

const JOB_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

/** Queue depths by state (read from Redis when scraped) and jobs finished or failed by this process. */
export function queueWorkerRegistry(queues: Queue[], workers: Array<{ queue: string; worker: Worker }>): Registry {
  const registry = createRegistry('queue-workers');
  new prom.Gauge({
    name: 'platform_queue_jobs',
    help: 'Jobs in each queue by state (waiting, active, delayed, failed, completed kept for inspection)',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      for (const queue of queues) {
        const counts = await queue.getJobCounts(...JOB_STATES);
        for (const state of JOB_STATES) this.set({ queue: queue.name, state }, counts[state] ?? 0);
      }
    },
  });
  const failures = new prom.Counter({
    name: 'platform_queue_job_failures_total',
    help: 'Job attempts that failed in this process, by queue, job and whether it was the last attempt',
    labelNames: ['queue', 'job', 'final'] as const,
    registers: [registry],
  });
  const completed = new prom.Counter({
    name: 'platform_queue_jobs_completed_total',
    help: 'Jobs completed by this process, by queue and job',
    labelNames: ['queue', 'job'] as const,
    registers: [registry],
  });
  for (const { queue, worker } of workers) {
    worker.on('failed', (job) => {
      const final = job ? job.attemptsMade >= (job.opts.attempts ?? 1) || job.finishedOn !== undefined : true;
      failures.inc({ queue, job: job?.name ?? 'unknown', final: String(final) });
    });
    worker.on('completed', (job) => completed.inc({ queue, job: job.name }));
  }
  return registry;
}

/** Cookbook sessions running and waiting for a person, across the platform (read from Postgres when scraped). */
export function temporalWorkerRegistry(sql: Sql): Registry {
  const registry = createRegistry('temporal-worker');
  new prom.Gauge({
    name: 'platform_cookbook_sessions_active',
    help: 'Cookbook sessions not ended, by status: running (an agent step) or waiting_for_human',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const rows = await sql<{ status: string; n: number }[]>`
        select status, count(*)::int as n from cookbook_sessions where status in ('running', 'waiting_for_human') group by status`;
      this.set({ status: 'running' }, 0);
      this.set({ status: 'waiting_for_human' }, 0);
      for (const row of rows) this.set({ status: row.status }, row.n);
    },
  });
  new prom.Gauge({
    name: 'platform_cookbook_sessions_oldest_wait_seconds',
    help: 'How long the longest-waiting human step has waited (0 when none): a session that stops progressing shows here',
    registers: [registry],
    async collect() {
      const [row] = await sql<{ seconds: number | null }[]>`
        select extract(epoch from now() - min(updated_at))::float8 as seconds from cookbook_sessions where status = 'waiting_for_human'`;
      this.set(row?.seconds ?? 0);
    },
  });
  return registry;
}

export { serveMetrics };
