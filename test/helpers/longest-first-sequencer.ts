import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import recorded from './file-durations.json' with { type: 'json' };

/** Seconds each file took in a recorded full run, by `project:path` (refreshed by `npm run test:durations`). */
const RECORDED: Record<string, number> = recorded.seconds;

/**
 * Starts the longest files first, so that no long file starts last and runs alone while the other
 * workers sit idle. vitest orders by its own cache of the last run's durations, which a clean clone
 * (and so CI) does not have: it then orders by file size, and a short file that runs long (the
 * OpenAPI fuzz, 5.8 KB and about a minute) started last and was the suite's last minute. Here a file's
 * duration is vitest's cache when there is one, else the recorded run's, else a guess from its size (a
 * new file); the longest go first. (docs/decisions/test-files-longest-first.md)
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const root = this.ctx.config.root;
    const seconds = new Map<TestSpecification, number>();
    for (const file of files) {
      const key = `${file.project.name}:${relative(root, file.moduleId)}`;
      const cached = cache.getFileTestResults(key)?.duration;
      seconds.set(file, cached !== undefined ? cached / 1000 : (RECORDED[key] ?? guessFromSize(file.moduleId)));
    }
    return [...files].sort((a, b) => seconds.get(b)! - seconds.get(a)!);
  }
}

/** A file not recorded yet: about a second per 2 KB, the suite's integration files' median. */
function guessFromSize(path: string): number {
  try {
    return statSync(path).size / 2_000;
  } catch {
    return 0;
  }
}
