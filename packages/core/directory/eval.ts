/**
 * Evaluation of discovery on the development set (docs/discovery-devset.json): recall@k (the
 * share of tasks with an expected API in the top k; with several acceptable APIs per task this is
 * "success at k") and mean reciprocal rank of the first expected API (top 10; 0 when absent).
 */
import type { LiveDirectoryIndex } from './index-loader.js';
import { readFile } from 'node:fs/promises';
import { discover } from './catalog.js';
import type { Db } from '#db/sql';

export interface DevTask {
  q: string;
  expected: string[];
}

export interface EvalResult {
  tasks: number;
  recallAt1: number;
  recallAt5: number;
  mrr: number;
  misses: { q: string; expected: string[]; got: string[] }[];
  unknownExpected: string[];
}

export async function loadDevset(path: string): Promise<DevTask[]> {
  const data = JSON.parse(await readFile(path, 'utf8')) as { tasks: DevTask[] };
  return data.tasks;
}

export async function evaluateDiscovery(db: Db, index: LiveDirectoryIndex, tasks: DevTask[]): Promise<EvalResult> {
  const known = new Set((await db<{ id: string }[]>`select id from apis where id = any(${tasks.flatMap((t) => t.expected)})`).map((r) => r.id));
  let at1 = 0;
  let at5 = 0;
  let rr = 0;
  const misses: EvalResult['misses'] = [];
  for (const task of tasks) {
    const { results } = await discover(index, task.q, 10, undefined, { feedback: false });
    const ids = results.map((r) => r.api.id);
    const rank = ids.findIndex((id) => task.expected.includes(id));
    if (rank === 0) at1 += 1;
    if (rank >= 0 && rank < 5) at5 += 1;
    else misses.push({ q: task.q, expected: task.expected.slice(0, 5), got: ids.slice(0, 5) });
    if (rank >= 0) rr += 1 / (rank + 1);
  }
  const n = tasks.length || 1;
  return {
    tasks: tasks.length,
    recallAt1: at1 / n,
    recallAt5: at5 / n,
    mrr: rr / n,
    misses,
    unknownExpected: [...new Set(tasks.flatMap((t) => t.expected))].filter((id) => !known.has(id)),
  };
}
