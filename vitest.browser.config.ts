import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Browser tests of the demo page (tests/browser): Vitest in Node builds the demo once (global set-up),
// serves it with `vite preview` (one server and one Chromium per file), and drives Debian's
// /usr/bin/chromium through playwright-core (no browser download).
// The files that bound no time run two at a time; then the two that bound a main-thread task's CPU
// time (from a Chromium trace) one at a time: with a second file's Chromium beside them on 2 cores
// a task measured up to 80 ms of thread time for a 50 ms bound. The dev-server test bounds a wall
// time (first heatmap within 5 s of the server being ready): it runs last, alone.
// Run: npx vitest run --config vitest.browser.config.ts
/** The demo files that bound a main-thread task's CPU time. */
const TIMED = ['tests/browser/demo-stumbles.test.ts', 'tests/browser/demo-training-lab.test.ts'];

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
          exclude: ['tests/browser/webgpu-*.test.ts', 'tests/browser/apps/**', ...TIMED, 'tests/browser/demo-dev-server.test.ts'],
          globalSetup: ['tests/browser/global-setup.ts'],
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'demo-timed',
          include: TIMED,
          globalSetup: ['tests/browser/global-setup.ts'],
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'dev-server',
          include: ['tests/browser/demo-dev-server.test.ts'],
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
