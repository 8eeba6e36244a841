import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// `npm run dev:dashboard` serves the UI with hot reload and forwards API calls to a running edge
// (`npm run up`). The Origin header is rewritten to the edge's own origin so its CSRF check, which
// only trusts PUBLIC_URL, accepts the dev server's requests.
const edge = process.env.EDGE_URL ?? 'http://127.0.0.1:3000';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  plugins: [react()],
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
