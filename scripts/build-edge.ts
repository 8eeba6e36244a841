/**
 * `npm run build:edge`: the edge as production runs it, one JavaScript file (`dist/edge/server.mjs`)
 * bundled from `apps/edge/src/server.ts` and everything of the repository it imports, with the npm
 * packages left as imports. `npm run up`, the Dockerfile, the benchmarks and the soak start this file
 * with plain `node`, not the TypeScript source through tsx: no loader thread, no per-module compile at
 * start-up and no inline source maps kept in the heap (docs/decisions/edge-build.md has the figures).
 *
 * A module that finds files beside itself (`new URL('../migrations', import.meta.url)`) keeps doing so
 * from the bundle: each `import.meta.url` in the repository's code becomes the URL of that module's own
 * source file, written relative to the bundle, so a moved checkout still works. The source map
 * (`server.mjs.map`, linked) maps the bundle's positions back to the TypeScript: the proxy benchmark
 * names the project's files with it, and `NODE_OPTIONS=--enable-source-maps` shows them in stack traces
 * (at the cost of the parsed map in memory, which is why it is off by default).
 */
import { readFile } from 'node:fs/promises';
import { dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface EdgeBuild {
  /** The bundle's path. */
  entry: string;
  /** Its size in bytes. */
  bytes: number;
}

/** Each `import.meta.url` of the repository's own modules, as the URL of that module's source file. */
function ownModuleUrls(outdir: string): Plugin {
  return {
    name: 'own-module-urls',
    setup(builder) {
      builder.onLoad({ filter: /\.(ts|mjs|js)$/ }, async (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`) || !args.path.startsWith(ROOT)) return undefined;
        // Read once here and handed to esbuild whether or not it names its own URL.
        const source = await readFile(args.path, 'utf8');
        const fromBundle = relative(outdir, args.path).split(sep).join('/');
        return {
          contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`),
          loader: args.path.endsWith('.ts') ? 'ts' : 'js',
        };
      });
    },
  };
}

/** Bundles the edge into `outdir` (default `dist/edge`). */
export async function buildEdge(outdir = resolve(ROOT, 'dist/edge')): Promise<EdgeBuild> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { server: resolve(ROOT, 'apps/edge/src/server.ts') },
    outdir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    // npm packages stay imports, resolved from node_modules at run time as before.
    packages: 'external',
    sourcemap: 'linked',
    // Not minified: stack traces and profiles name functions as written (a name two modules share
    // gets a digit, `encodeCursor2`).
    minify: false,
    metafile: true,
    logLevel: 'warning',
    plugins: [ownModuleUrls(outdir)],
  });
  const output = Object.entries(result.metafile.outputs).find(([path]) => path.endsWith('.mjs'));
  if (!output) throw new Error('esbuild wrote no bundle');
  return { entry: resolve(ROOT, output[0]), bytes: output[1].bytes };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const started = performance.now();
  const outdir = process.argv[2] ? resolve(process.argv[2]) : undefined;
  const built = await buildEdge(outdir);
  const shown = relative(process.cwd(), built.entry) || built.entry;
  process.stdout.write(
    `[build] edge: ${shown.startsWith('..') ? built.entry : shown} (${(built.bytes / 1024).toFixed(0)} KB, ${Math.round(performance.now() - started)} ms; start it with node ${dirname(shown)}/server.mjs)\n`,
  );
}
