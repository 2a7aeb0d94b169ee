import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

// Cross-origin isolation (SharedArrayBuffer) for the later -pthread build.
const isolationHeaders = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  resolve: {
    // The demo imports the library by its package name, served from source.
    alias: { 'sdpa-web': fileURLToPath(new URL('../src/index.ts', import.meta.url)) },
  },
  server: {
    headers: isolationHeaders,
    fs: { allow: [repoRoot] },
  },
  preview: {
    headers: isolationHeaders,
  },
  worker: { format: 'es' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
  },
});
