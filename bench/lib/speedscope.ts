// Converts a V8 `.cpuprofile` (from `node --cpu-prof`) into speedscope's file format
// (https://www.speedscope.app/file-format-schema.json), a flame graph to open at https://www.speedscope.app.
// One "sampled" profile: each sample is the stack of frame indices root → leaf, its weight the time until
// the next sample (µs), the convention summarizeProfile uses for self time. Consecutive samples with the
// same stack are merged into one; V8's "(root)" frame is left out; "(idle)" samples are left out unless
// asked for (the summary's shares are of busy time too).
import { readFileSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { shortPath } from './cpu-profile.js';
import { sourceFrame } from './source-maps.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber?: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface V8CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SpeedscopeFrame {
  name: string;
  file?: string;
  line?: number;
  col?: number;
}
export interface SpeedscopeFile {
  $schema: 'https://www.speedscope.app/file-format-schema.json';
  shared: { frames: SpeedscopeFrame[] };
  profiles: Array<{
    type: 'sampled';
    name: string;
    unit: 'microseconds';
    startValue: number;
    endValue: number;
    samples: number[][];
    weights: number[];
  }>;
  name: string;
  exporter: string;
  activeProfileIndex: number;
}

export interface SpeedscopeOptions {
  /** Name of the profile (shown by speedscope). */
  name: string;
  /** Samples before this many milliseconds after the profile started (start-up, warm-up) are left out. */
  fromMs?: number;
  /** Keep "(idle)" samples (the event loop waiting). Default: left out. */
  keepIdle?: boolean;
  /**
   * Size budget of the JSON (bytes). Over it, identical stacks are summed wherever they occur (first
   * occurrence order): the flame graph ("Left Heavy", "Sandwich") stays exact, the time order is lost.
   */
  maxBytes?: number;
}

export interface SpeedscopeResult {
  file: SpeedscopeFile;
  json: string;
  /** True when the size budget made the stacks aggregated rather than in time order. */
  aggregated: boolean;
}

/** Converts a parsed V8 CPU profile. */
export function toSpeedscope(profile: V8CpuProfile, options: SpeedscopeOptions): SpeedscopeFile {
  const fromUs = (options.fromMs ?? 0) * 1000;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

  const frames: SpeedscopeFrame[] = [];
  const frameIndex = new Map<string, number>();
  const indexOf = (callFrame: CallFrame): number => {
    const { functionName, url, lineNumber, columnNumber } = sourceFrame(callFrame);
    const frame: SpeedscopeFrame = { name: functionName || '(anonymous)' };
    if (url) {
      frame.file = shortPath(url);
      // V8 counts lines and columns from 0, speedscope from 1; native frames have -1.
      if (lineNumber >= 0) frame.line = lineNumber + 1;
      if (columnNumber !== undefined && columnNumber >= 0) frame.col = columnNumber + 1;
    }
    const key = `${frame.name}\u0000${frame.file ?? ''}\u0000${frame.line ?? ''}\u0000${frame.col ?? ''}`;
    let index = frameIndex.get(key);
    if (index === undefined) {
      index = frames.length;
      frames.push(frame);
      frameIndex.set(key, index);
    }
    return index;
  };

  // The stack of each sampled node, root → leaf (without "(root)"), and a key to compare stacks.
  const stacks = new Map<number, { frames: number[]; key: string; idle: boolean }>();
  const stackOf = (id: number) => {
    let stack = stacks.get(id);
    if (stack) return stack;
    const path: number[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const node = byId.get(at);
      if (!node) break;
      if (node.callFrame.functionName === '(root)' && !node.callFrame.url && !parentOf.has(at)) break;
      path.push(indexOf(node.callFrame));
    }
    path.reverse();
    stack = { frames: path, key: path.join(','), idle: byId.get(id)?.callFrame.functionName === '(idle)' };
    stacks.set(id, stack);
    return stack;
  };

  const samples: number[][] = [];
  const weights: number[] = [];
  let lastKey: string | null = null;
  let elapsedUs = 0;
  let startValue: number | null = null;
  for (let i = 0; i < profile.samples.length; i += 1) {
    elapsedUs += profile.timeDeltas[i] ?? 0;
    if (elapsedUs < fromUs) continue;
    // The time until the next sample (the last sample: until the profile's end).
    const weight = i + 1 < profile.samples.length ? (profile.timeDeltas[i + 1] ?? 0) : Math.max(0, profile.endTime - (profile.startTime + elapsedUs));
    startValue ??= elapsedUs;
    if (weight <= 0) continue;
    const stack = stackOf(profile.samples[i]!);
    if (stack.idle && !options.keepIdle) continue;
    if (stack.frames.length === 0) continue;
    if (stack.key === lastKey) {
      weights[weights.length - 1]! += weight;
      continue;
    }
    samples.push(stack.frames);
    weights.push(weight);
    lastKey = stack.key;
  }
  const start = startValue ?? 0;
  // Left-out idle time would show as blank space at the end: the range is the time the samples cover.
  const total = weights.reduce((sum, w) => sum + w, 0);
  return {
    $schema: 'https://www.speedscope.app/file-format-schema.json',
    shared: { frames },
    profiles: [{ type: 'sampled', name: options.name, unit: 'microseconds', startValue: start, endValue: start + total, samples, weights }],
    name: options.name,
    exporter: 'bench/lib/speedscope.ts',
    activeProfileIndex: 0,
  };
}

/** Sums the weights of identical stacks wherever they occur, in the order each stack first appears. */
export function aggregateStacks(file: SpeedscopeFile): SpeedscopeFile {
  const profile = file.profiles[0]!;
  const at = new Map<string, number>();
  const samples: number[][] = [];
  const weights: number[] = [];
  profile.samples.forEach((stack, i) => {
    const key = stack.join(',');
    const index = at.get(key);
    if (index === undefined) {
      at.set(key, samples.length);
      samples.push(stack);
      weights.push(profile.weights[i]!);
    } else {
      weights[index]! += profile.weights[i]!;
    }
  });
  return { ...file, profiles: [{ ...profile, samples, weights }], exporter: `${file.exporter} (identical stacks summed: no time order)` };
}

/** Converts, and aggregates identical stacks when the time-ordered JSON is over `maxBytes`. */
export function speedscopeJson(profile: V8CpuProfile, options: SpeedscopeOptions): SpeedscopeResult {
  const file = toSpeedscope(profile, options);
  const json = JSON.stringify(file);
  if (options.maxBytes === undefined || Buffer.byteLength(json) <= options.maxBytes) return { file, json, aggregated: false };
  const aggregated = aggregateStacks(file);
  return { file: aggregated, json: JSON.stringify(aggregated), aggregated: true };
}

/**
 * Reads a `.cpuprofile` and writes its speedscope file (creating the folder); returns the file's size,
 * its number of (merged) samples and frames, and whether the size budget made it aggregated.
 */
export function writeSpeedscope(
  cpuprofilePath: string,
  outPath: string,
  options: SpeedscopeOptions,
): { bytes: number; samples: number; frames: number; aggregated: boolean } {
  const { file, json, aggregated } = speedscopeJson(JSON.parse(readFileSync(cpuprofilePath, 'utf8')) as V8CpuProfile, options);
  mkdirSync(dirname(outPath), { recursive: true });
  writeFileSync(outPath, json);
  return { bytes: statSync(outPath).size, samples: file.profiles[0]!.samples.length, frames: file.shared.frames.length, aggregated };
}
