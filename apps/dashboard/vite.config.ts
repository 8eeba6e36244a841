import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompress, constants, gzip } from 'node:zlib';
import { promisify } from 'node:util';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

// `npm run dev:dashboard` serves the UI with hot reload and forwards API calls to a running edge
// (`npm run up`). The Origin header is rewritten to the edge's own origin so its CSRF check, which
// only trusts PUBLIC_URL, accepts the dev server's requests.
const edge = process.env.EDGE_URL ?? 'http://127.0.0.1:3000';

/** Text assets worth compressing; index.html is not among them (the edge sends it with settings injected). */
const COMPRESSIBLE = /\.(js|css|svg|json)$/;

/**
 * Writes a brotli (`.br`) and a gzip (`.gz`) copy beside each built text asset, at the highest
 * levels: it is done once per build, so the edge (@fastify/static `preCompressed`) sends the
 * smallest file the browser accepts without compressing anything per request.
 */
function precompress(): Plugin {
  const brotli = promisify(brotliCompress);
  const gzipped = promisify(gzip);
  return {
    name: 'precompress',
    apply: 'build',
    async writeBundle(options, bundle) {
      const outDir = options.dir ?? 'dist';
      const files = Object.keys(bundle).filter((name) => COMPRESSIBLE.test(name));
      await Promise.all(
        files.map(async (name) => {
          const path = join(outDir, name);
          const source = await readFile(path);
          const [br, gz] = await Promise.all([
            brotli(source, {
              params: { [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY, [constants.BROTLI_PARAM_SIZE_HINT]: source.length },
            }),
            gzipped(source, { level: constants.Z_BEST_COMPRESSION }),
          ]);
          await Promise.all([writeFile(`${path}.br`, br), writeFile(`${path}.gz`, gz)]);
        }),
      );
    },
  };
}

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  plugins: [react(), precompress()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: {
    port: 5173,
    proxy: {
      '/api': {
        target: edge,
        changeOrigin: true,
        configure: (proxy) => proxy.on('proxyReq', (request) => request.setHeader('origin', edge)),
      },
    },
  },
});
