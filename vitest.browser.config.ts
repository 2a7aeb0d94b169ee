import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Browser tests of the demo page (tests/browser): Vitest in Node builds the demo once (global set-up),
// serves it with `vite preview` (one server and one Chromium per file), and drives Debian's
// /usr/bin/chromium through playwright-core (no browser download).
// One file at a time: the tests that bound a main-thread task's CPU time (from a Chromium trace)
// measured up to 80 ms of thread time for a 50 ms bound with a second file's Chromium beside them
// on 2 cores. The dev-server test bounds a wall time (first heatmap within 5 s of the server being
// ready): it runs last.
// Run: npx vitest run --config vitest.browser.config.ts
export default defineConfig({
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('./web/src/index.ts', import.meta.url)) },
  },
  test: {
    environment: 'node',
    // Vitest browser mode: vitest.browser-webgpu.config.ts; the packed package in fresh apps: vitest.browser-apps.config.ts
    exclude: ['tests/browser/webgpu-*.test.ts', 'tests/browser/apps/**'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    reporters: process.env.CI ? ['verbose'] : ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'demo',
          include: ['tests/browser/**/*.test.ts'],
          exclude: ['tests/browser/webgpu-*.test.ts', 'tests/browser/apps/**', 'tests/browser/demo-dev-server.test.ts'],
          globalSetup: ['tests/browser/global-setup.ts'],
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'dev-server',
          include: ['tests/browser/demo-dev-server.test.ts'],
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
