// Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): self time by function and by package or
// source file, as a share of the busy (non-idle) time.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFrame } from './source-maps.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  functions: Array<{ name: string; ms: number; share: number }>;
  areas: Array<{ name: string; ms: number; share: number }>;
  /** Every area, not only the top ones. */
  allAreas: Array<{ name: string; ms: number; share: number }>;
  /** Every function, not only the top ones. */
  allFunctions: Array<{ name: string; ms: number; share: number }>;
}

/** The repository's root (with its trailing slash): left out of the paths shown. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A script URL as shown in reports and flame graphs: a dependency from its package name
 * (`undici/lib/...`), the project's own files relative to the repository (`apps/edge/src/...`),
 * Node's internals as they are (`node:internal/...`).
 */
export function shortPath(url: string): string {
  const path = url.startsWith('file://') ? decodeURIComponent(url.slice('file://'.length)) : url;
  const inModules = path.lastIndexOf('node_modules/');
  if (inModules >= 0) return path.slice(inModules + 'node_modules/'.length);
  if (path.startsWith(ROOT)) return path.slice(ROOT.length);
  return path;
}

export function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native / V8)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg?.[1]) return pkg[1];
  if (url.startsWith('node:')) return 'node internals';
  return shortPath(url);
}

/** `fromMs`: samples before this many milliseconds after the profile started (start-up, warm-up) are left out. */
export function summarizeProfile(path: string, top = 15, fromMs = 0): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let elapsedUs = 0;
  for (let i = 0; i < profile.samples.length; i += 1) {
    elapsedUs += profile.timeDeltas[i] ?? 0;
    if (elapsedUs < fromMs * 1000) continue;
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  }
  const fns = new Map<string, number>();
  const areas = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = sourceFrame(node.callFrame);
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    const name = url ? `${functionName || '(anonymous)'} (${shortPath(url)}:${lineNumber + 1})` : functionName || '(anonymous)';
    fns.set(name, (fns.get(name) ?? 0) + us);
    const a = area(url, functionName);
    areas.set(a, (areas.get(a) ?? 0) + us);
  }
  const rank = (m: Map<string, number>, limit = top) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, us]) => ({ name, ms: us / 1000, share: busy ? us / busy : 0 }));
  return {
    busyMs: busy / 1000,
    idleMs: idle / 1000,
    functions: rank(fns),
    areas: rank(areas),
    allAreas: rank(areas, Infinity),
    allFunctions: rank(fns, Infinity),
  };
}

export function profileMarkdown(summary: ProfileSummary): string {
  const pct = (s: number) => `${(s * 100).toFixed(1)} %`;
  return [
    `Busy ${(summary.busyMs / 1000).toFixed(1)} s, idle ${(summary.idleMs / 1000).toFixed(1)} s of the profiled run.`,
    '',
    '| self time by package / file | share of busy time |',
    '|---|---|',
    ...summary.areas.map((a) => `| ${a.name} | ${pct(a.share)} |`),
    '',
    '| top functions by self time | share of busy time |',
    '|---|---|',
    ...summary.functions.map((f) => `| \`${f.name.replace(/\|/g, '\\|')}\` | ${pct(f.share)} |`),
  ].join('\n');
}

/**
 * Where one profiled run's extra CPU went against another's: main-thread self time per answered call
 * (µs), by package / file and by function, the `top` largest differences (either sign) of each, with the
 * whole busy time per call first. `b` is the run compared (say, with a feature on), `a` the reference.
 */
export function profileDiffMarkdown(
  a: { summary: ProfileSummary; calls: number; label: string },
  b: { summary: ProfileSummary; calls: number; label: string },
  top = 8,
): string {
  const perCall = (ms: number, calls: number) => (ms * 1000) / Math.max(1, calls);
  const us = (n: number) => n.toFixed(1);
  const signed = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)}`;
  const diff = (left: ProfileSummary['allAreas'], right: ProfileSummary['allAreas']) => {
    const names = new Set([...left.map((x) => x.name), ...right.map((x) => x.name)]);
    const of = (list: ProfileSummary['allAreas'], name: string) => list.find((x) => x.name === name)?.ms ?? 0;
    return [...names]
      .map((name) => {
        const before = perCall(of(left, name), a.calls);
        const after = perCall(of(right, name), b.calls);
        return { name, before, after, delta: after - before };
      })
      .sort((x, y) => Math.abs(y.delta) - Math.abs(x.delta))
      .slice(0, top);
  };
  const busyA = perCall(a.summary.busyMs, a.calls);
  const busyB = perCall(b.summary.busyMs, b.calls);
  const row = (r: { name: string; before: number; after: number; delta: number }, code = false) =>
    `| ${code ? `\`${r.name.replace(/\|/g, '\\|')}\`` : r.name} | ${us(r.before)} | ${us(r.after)} | ${signed(r.delta)} |`;
  return [
    `| main-thread self time per answered call (µs) | ${a.label} | ${b.label} | difference |`,
    '|---|---|---|---|',
    `| **all (busy time)** | ${us(busyA)} | ${us(busyB)} | ${signed(busyB - busyA)} |`,
    ...diff(a.summary.allAreas, b.summary.allAreas).map((r) => row(r)),
    '',
    `| function (the ${top} largest differences) | ${a.label} | ${b.label} | difference |`,
    '|---|---|---|---|',
    ...diff(a.summary.allFunctions, b.summary.allFunctions).map((r) => row(r, true)),
  ].join('\n');
}

/**
 * Profiles this process while `fn` runs (the V8 sampling profiler through node:inspector, as
 * `--cpu-prof` does for a whole process) and summarizes it.
 */
export async function profileWhile<T>(fn: () => Promise<T>, top = 12): Promise<{ result: T; summary: ProfileSummary }> {
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  let result: T;
  let profile: unknown;
  try {
    result = await fn();
  } finally {
    ({ profile } = (await session.post('Profiler.stop')) as { profile: unknown });
    session.disconnect();
  }
  const path = join(mkdtempSync(join(tmpdir(), 'bench-profile-')), 'in-process.cpuprofile');
  writeFileSync(path, JSON.stringify(profile));
  return { result, summary: summarizeProfile(path, top) };
}
