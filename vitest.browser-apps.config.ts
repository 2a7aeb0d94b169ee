import { defineConfig } from 'vitest/config';

// The packed package in fresh apps (tests/browser/apps): `npm pack`, installed offline into a Vite
// app run under `vite` dev and `vite build` + `vite preview`, and bundled by esbuild; Vitest in
// Node drives Debian's /usr/bin/chromium through playwright-core. Step `browser_apps` of
// scripts/test.sh runs it.
export default defineConfig({
  test: {
    environment: 'node',
    include: ['tests/browser/apps/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 600_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
