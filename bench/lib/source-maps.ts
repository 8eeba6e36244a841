// Positions in a bundle, mapped back to the source they came from. The benchmarks run the edge as
// production does, from `npm run build:edge`'s bundle (dist/edge/server.mjs): a profile's frames name
// that one file, and its linked source map (server.mjs.map) names the TypeScript file and line of each.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** A V8 call frame: lines and columns from 0. */
export interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber?: number;
}

const maps = new Map<string, { map: SourceMap; dir: string } | null>();

function mapOf(url: string) {
  let entry = maps.get(url);
  if (entry === undefined) {
    entry = null;
    if (url.startsWith('file://') && url.endsWith('.mjs')) {
      const file = fileURLToPath(url);
      if (existsSync(`${file}.map`)) {
        const payload = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as ConstructorParameters<typeof SourceMap>[0];
        entry = { map: new SourceMap(payload), dir: dirname(file) };
      }
    }
    maps.set(url, entry);
  }
  return entry;
}

/** The frame as its source names it, when its script is a bundle with a source map; else unchanged. */
export function sourceFrame<T extends Frame>(frame: T): T {
  if (!frame.url || frame.lineNumber < 0) return frame;
  const found = mapOf(frame.url);
  if (!found) return frame;
  const at = found.map.findEntry(frame.lineNumber, Math.max(0, frame.columnNumber ?? 0));
  if (!('originalSource' in at) || !at.originalSource) return frame;
  return {
    ...frame,
    url: pathToFileURL(resolve(found.dir, at.originalSource)).href,
    lineNumber: at.originalLine,
    columnNumber: at.originalColumn,
  };
}
