import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { relaxedSimdUnavailableReason } from './web/src/relaxed-simd.js';

// The relaxed-SIMD build of the wasm module runs in every test process: node 20 has relaxed SIMD
// behind a flag (node 22 has it on). tests/node/*-simd128.test.ts cover the SIMD128 build.
const execArgv = relaxedSimdUnavailableReason() ? ['--experimental-wasm-relaxed-simd'] : [];

/**
 * The WebGPU files first, in Vitest's order otherwise. They run on SwiftShader, where nearly all of
 * the step's time goes, and the longest of them (attention-webgpu, hardening-webgpu: the shared
 * suites on 'webgpu') are 7-line files: on a clean clone, with no durations cached, Vitest starts
 * the largest files first and left those for last, one worker finishing them while the other idled.
 */
class WebGpuFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const webgpu = (file: TestSpecification) => file.moduleId.includes('webgpu');
    return [...sorted.filter(webgpu), ...sorted.filter((file) => !webgpu(file))];
  }
}

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
    // The machine is slow and shared: generous limits, few workers. SwiftShader runs the tiled
    // WebGPU kernel (64 to 256 invocations, a barrier per step) several times slower than a GPU would.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    execArgv,
    maxWorkers: 2,
    fileParallelism: true,
    sequence: { sequencer: WebGpuFilesFirst },
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
