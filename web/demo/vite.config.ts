import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

// Cross-origin isolation (SharedArrayBuffer), which the library's threads need in browsers.
const isolationHeaders = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// The demo page. `sdpa-web` resolves to the library's TypeScript source, so the page always runs the
// library in this checkout (and its WebAssembly, emitted as a hashed asset by `vite build`).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('../src/index.ts', import.meta.url)) },
  },
  server: {
    headers: isolationHeaders,
    fs: { allow: [repoRoot] },
  },
  preview: {
    headers: isolationHeaders,
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // KaTeX and Observable Plot (with d3) make one ~1 MB chunk; fine for a demo page.
    chunkSizeWarningLimit: 2000,
  },
});
