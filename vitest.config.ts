import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Node-side tests (tests/node). Browser tests (tests/browser) get their own
// config/step in scripts/test.sh.
export default defineConfig({
  resolve: {
    // Tests import the package by name, like users do; this maps it to source.
    alias: { 'sdpa-web': fileURLToPath(new URL('./web/src/index.ts', import.meta.url)) },
  },
  test: {
    environment: 'node',
    // WebGPU tests run on dawn.node + SwiftShader (tests/node/support/webgpu.ts).
    env: { VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES ?? '/usr/lib/chromium/vk_swiftshader_icd.json' },
    include: ['tests/node/**/*.test.ts'],
    // The machine is slow and shared: generous limits, few workers.
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
    fileParallelism: true,
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
