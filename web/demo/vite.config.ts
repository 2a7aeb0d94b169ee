import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

// The demo page. `sdpa-web` resolves to the library's TypeScript source, so the page always runs the
// library in this checkout (and its WebAssembly, emitted as a hashed asset by `vite build`).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('../src/index.ts', import.meta.url)) },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 2000,
  },
  server: { fs: { allow: [fileURLToPath(new URL('../..', import.meta.url))] } },
});
