import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EDGE_NODE_OPTIONS, edgeSettings, LOW_MEMORY_EDGE_NODE_OPTIONS, loadEdgeSettings } from '#edge/config';
import { loadWorkerSettings } from '#workers/settings';
import { loadRankerSettings } from '#workers/directory/settings';

/** `.env.example` as scripts/lib.sh reads a `.env` (shell assignments; comments and blank lines skipped). */
function readExample(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(new URL('../../.env.example', import.meta.url), 'utf8').split('\n')) {
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (match) env[match[1]!] = match[2]!;
  }
  return env;
}

describe('.env.example', () => {
  it('is a valid configuration: a newcomer who copies it to .env gets an edge and workers that start', () => {
    const env = readExample();
    expect(Object.keys(env).length).toBeGreaterThan(20);
    const edge = loadEdgeSettings({ ...env });
    expect(() => loadWorkerSettings({ ...env })).not.toThrow();
    const ranker = loadRankerSettings({ ...env });
    // The edges ask the ranking process where it listens.
    expect(edge.DIRECTORY_RANK_URL).toBe(`http://${ranker.DIRECTORY_RANK_HOST}:${ranker.DIRECTORY_RANK_PORT}`);
    // Each value it sets is the one the edge would use anyway, so copying it changes nothing by surprise.
    const defaults = edgeSettings.parse({});
    for (const [name, value] of Object.entries(env)) {
      if (!(name in defaults) || name === 'DATABASE_URL' || name === 'REDIS_URL') continue;
      expect(String((edge as Record<string, unknown>)[name]), name).toBe(String((defaults as Record<string, unknown>)[name]));
      expect(value.length, name).toBeGreaterThan(0);
    }
  });

  it('passes EDGE_NODE_OPTIONS to the edge alone wherever it is started (npm run up, docker-compose.yml, the image), the same default everywhere', () => {
    const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
    // By default a small young generation; the heap limits that make a smaller edge still cost peak
    // throughput, so they are an operator's choice, named in the comment above the setting.
    expect(readExample().EDGE_NODE_OPTIONS).toBe(DEFAULT_EDGE_NODE_OPTIONS);
    expect(read('.env.example')).toContain(`"${LOW_MEMORY_EDGE_NODE_OPTIONS}"`);
    // The edge runs from its bundle (npm run build:edge), built fresh by npm run up and in the image.
    expect(read('scripts/up.sh')).toContain('npm run --silent build:edge');
    expect(read('scripts/up.sh')).toContain(`NODE_OPTIONS="\${EDGE_NODE_OPTIONS-${DEFAULT_EDGE_NODE_OPTIONS}}" node dist/edge/server.mjs`);
    expect(read('Dockerfile')).toContain('npm run build:edge');
    expect(read('docker-compose.yml')).toContain(`command: ['node', 'dist/edge/server.mjs']`);
    expect(read('docker-compose.yml')).toContain(`NODE_OPTIONS: \${EDGE_NODE_OPTIONS-${DEFAULT_EDGE_NODE_OPTIONS}}`);
    const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1];
    expect(JSON.parse(cmd ?? '[]')).toEqual(['node', ...DEFAULT_EDGE_NODE_OPTIONS.split(' '), 'dist/edge/server.mjs']);
  });
});
