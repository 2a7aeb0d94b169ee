import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Browser tests of the demo page (tests/browser): Vitest in Node builds the demo, serves it with
// `vite preview`, and drives Debian's /usr/bin/chromium through playwright-core (no browser download).
// Run: npx vitest run --config vitest.browser.config.ts
export default defineConfig({
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('./web/src/index.ts', import.meta.url)) },
  },
  test: {
    environment: 'node',
    include: ['tests/browser/**/*.test.ts'],
    // Vitest browser mode: vitest.browser-webgpu.config.ts; the packed package in fresh apps: vitest.browser-apps.config.ts
    exclude: ['tests/browser/webgpu-*.test.ts', 'tests/browser/apps/**'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
