import { spawnSync } from 'node:child_process';

/** `promtool check metrics` (Debian's prometheus package) on an exposition text: its verdict and complaints. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}` };
}

/** The value of one series in an exposition text, or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
