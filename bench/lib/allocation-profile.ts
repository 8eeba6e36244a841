// Allocations per call of another process, from V8's sampling heap profiler over the inspector
// protocol (the process runs with `--inspect=127.0.0.1:<port>`). Objects the garbage collector has
// already taken are kept in the profile (`includeObjectsCollectedBy*GC`), so it counts every byte
// allocated while it ran, not only what is still alive: the load the garbage collector has to carry.
import { area, shortPath } from './cpu-profile.js';
import { sourceFrame } from './source-maps.js';

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  /** Bytes allocated at this frame itself (scaled by V8 from its samples). */
  selfSize: number;
  children: HeapNode[];
}

export interface AllocationSummary {
  /** Bytes allocated while sampling, estimated from the samples. */
  bytes: number;
  /** By package / file (as the CPU profile groups them), every one. */
  areas: Map<string, number>;
  /** By function and its place (`name (file:line)`), every one. */
  sites: Map<string, number>;
}

/** A small client of the inspector protocol over the WebSocket the process's `--inspect` opens. */
async function connect(port: number): Promise<{ call(method: string, params?: object): Promise<unknown>; close(): void }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${port}`);
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new Error(`could not connect to the inspector on port ${port}`));
  });
  let next = 0;
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  socket.onmessage = (message) => {
    const data = JSON.parse(String(message.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const pending = data.id === undefined ? undefined : waiting.get(data.id);
    if (!pending) return;
    waiting.delete(data.id!);
    if (data.error) pending.reject(new Error(data.error.message));
    else pending.resolve(data.result);
  };
  return {
    call: (method, params = {}) =>
      new Promise((resolve, reject) => {
        next += 1;
        waiting.set(next, { resolve, reject });
        socket.send(JSON.stringify({ id: next, method, params }));
      }),
    close: () => socket.close(),
  };
}

/**
 * Samples the allocations of the process whose inspector listens on `port` while `during` runs.
 * `intervalBytes`: the mean distance between samples (V8's default is 32 KiB; smaller is finer and slower).
 */
export async function sampleAllocations<T>(
  port: number,
  during: () => Promise<T>,
  intervalBytes = 16_384,
  /** false: leave out what a young-generation collection took, so what is left is what survived one (promoted, mostly). */
  withYoungGarbage = true,
): Promise<{ result: T; summary: AllocationSummary }> {
  const inspector = await connect(port);
  try {
    await inspector.call('HeapProfiler.enable');
    await inspector.call('HeapProfiler.startSampling', {
      samplingInterval: intervalBytes,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: withYoungGarbage,
    });
    const result = await during();
    const { profile } = (await inspector.call('HeapProfiler.stopSampling')) as { profile: { head: HeapNode } };
    return { result, summary: summarizeAllocations(profile.head) };
  } finally {
    inspector.close();
  }
}

export function summarizeAllocations(head: HeapNode): AllocationSummary {
  const summary: AllocationSummary = { bytes: 0, areas: new Map(), sites: new Map() };
  const add = (map: Map<string, number>, key: string, bytes: number) => map.set(key, (map.get(key) ?? 0) + bytes);
  const stack: HeapNode[] = [head];
  while (stack.length > 0) {
    const node = stack.pop()!;
    stack.push(...node.children);
    if (node.selfSize === 0) continue;
    const { functionName, url, lineNumber } = sourceFrame(node.callFrame);
    summary.bytes += node.selfSize;
    add(summary.areas, area(url, functionName), node.selfSize);
    add(
      summary.sites,
      url ? `${functionName || '(anonymous)'} (${shortPath(url)}:${lineNumber + 1})` : functionName || '(native / V8)',
      node.selfSize,
    );
  }
  return summary;
}

/**
 * Bytes allocated per answered call, `a` (the process under study) beside `b` (its baseline): the whole,
 * by package / file (the `top` largest differences), then `a`'s `top` largest allocation sites.
 */
export function allocationDiffMarkdown(
  a: { summary: AllocationSummary; calls: number; label: string },
  b: { summary: AllocationSummary; calls: number; label: string },
  top = 12,
): string {
  const perCall = (bytes: number, calls: number) => bytes / Math.max(1, calls);
  const kb = (bytes: number) => (bytes / 1024).toFixed(2);
  const signed = (bytes: number) => `${bytes >= 0 ? '+' : ''}${kb(bytes)}`;
  const names = new Set([...a.summary.areas.keys(), ...b.summary.areas.keys()]);
  const areas = [...names]
    .map((name) => {
      const left = perCall(a.summary.areas.get(name) ?? 0, a.calls);
      const right = perCall(b.summary.areas.get(name) ?? 0, b.calls);
      return { name, left, right, delta: left - right };
    })
    .sort((x, y) => Math.abs(y.delta) - Math.abs(x.delta))
    .slice(0, top);
  const sites = [...a.summary.sites.entries()].sort((x, y) => y[1] - x[1]).slice(0, top);
  const totalA = perCall(a.summary.bytes, a.calls);
  const totalB = perCall(b.summary.bytes, b.calls);
  const code = (text: string) => `\`${text.replace(/\|/g, '\\|')}\``;
  return [
    `| KiB allocated per answered call | ${a.label} | ${b.label} | difference |`,
    '|---|---|---|---|',
    `| **all** | ${kb(totalA)} | ${kb(totalB)} | ${signed(totalA - totalB)} |`,
    ...areas.map((r) => `| ${r.name} | ${kb(r.left)} | ${kb(r.right)} | ${signed(r.delta)} |`),
    '',
    `| where the ${a.label} allocates (the ${top} largest sites) | KiB per answered call | share |`,
    '|---|---|---|',
    ...sites.map(
      ([name, bytes]) => `| ${code(name)} | ${kb(perCall(bytes, a.calls))} | ${((bytes / Math.max(1, a.summary.bytes)) * 100).toFixed(1)} % |`,
    ),
  ].join('\n');
}
