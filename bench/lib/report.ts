import { execSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

/** The load average when the scenario's process started (each scenario is its own process). */
const LOAD_AT_START = os
  .loadavg()
  .map((l) => l.toFixed(2))
  .join(' / ');

export const BENCHMARKS_MD = fileURLToPath(new URL('../../docs/BENCHMARKS.md', import.meta.url));

export interface Summary {
  median: number;
  min: number;
  max: number;
}

/** Median, min and max of repeated measurements. */
export function summarize(values: number[]): Summary {
  if (values.length === 0) throw new Error('no measurements');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** Percentile (nearest rank) of unsorted samples. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const fmt = (value: number, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');
export const fmtSummary = (s: Summary, digits = 2) => `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;

function safe(command: string): string {
  try {
    return execSync(command, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

/** Date, machine and versions, written at the top of each scenario's section. */
export function environmentLine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return [
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    `${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    `Node ${process.versions.node}`,
    safe('psql --version').replace('psql (PostgreSQL) ', 'PostgreSQL '),
    safe('redis-server --version').split(' ').slice(0, 3).join(' '),
    `commit ${safe('git rev-parse --short HEAD')}`,
    `load average at the scenario's start ${LOAD_AT_START} (1 / 5 / 15 min)`,
  ].join(' · ');
}

/**
 * Replaces one scenario's section of docs/BENCHMARKS.md (between its markers), leaving the other
 * scenarios' sections as they were, so each scenario can be re-run on its own.
 */
export function writeSection(scenario: string, markdown: string): void {
  const start = `<!-- scenario:${scenario} -->`;
  const end = `<!-- /scenario:${scenario} -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let doc = existsSync(BENCHMARKS_MD) ? readFileSync(BENCHMARKS_MD, 'utf8') : '# Benchmarks\n';
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  doc = from >= 0 && to > from ? doc.slice(0, from) + block + doc.slice(to + end.length) : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(BENCHMARKS_MD, doc);
  console.log(`[bench] wrote the "${scenario}" section of docs/BENCHMARKS.md`);
}

export function log(scenario: string, line: string): void {
  console.log(`[bench:${scenario}] ${line}`);
}
